;; A 10M-entry table (80 MB of host memory per instance): refused at load.
(module
  (table 10000000 funcref)
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64) (i64.const 1)))
