;; params.wat with a declaration the host refuses: type "float".
(module
  (memory (export "memory") 1)
  (data (i32.const 2048) "\02\00\00\00" "\00\00\00\00" "\00\00\00\00" "\00\00\00\00")
  (data (i32.const 4096) "limit\09float\091\09\09\09\0a")
  (func (export "wasmsched_abi_version") (result i32) (i32.const 4))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 16)))
  (func (export "wasmsched_params") (result i64)
    (i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.const 17))))
