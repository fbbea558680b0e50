;; Loops forever in kind (the other exports behave).
(module
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (loop $l (br $l)) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64) (i64.const 0x40000000000)))
