;; An ABI version 4 serial plugin whose decision is the bytes of the
;; snapshot's policy field: a test encodes any decision record (in either
;; form) as the policy name and gets it back as the guest's output. The
;; input buffer is at 1024; the policy string reference is at bytes 24..32.
(module
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 4))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (i32.add (i32.const 1024) (i32.load (i32.const 1048)))) (i64.const 32))
      (i64.extend_i32_u (i32.load (i32.const 1052))))))
