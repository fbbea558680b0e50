;; Exports global 0 under the host's own name, without declaring it.
;; Invalid as given.
(module
  (memory (export "memory") 1)
  (export "wasmsched_stop_alias" (global 0))
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64) (i64.const 1)))
