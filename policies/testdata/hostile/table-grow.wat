;; A table without a maximum, grown by 2^30 entries at every decision:
;; refused at load (a module that uses table.grow must declare a table
;; maximum of at most MaxTableSize).
(module
  (table 1 funcref)
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (drop (table.grow 0 (ref.null func) (i32.const 1073741824)))
    (i64.const 1)))
