;; Calls function index 4, which it does not declare: after the deadline
;; rewrite that is the host's injected $yield. Invalid as given.
(module
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (call 4)
    (i64.const 1)))
