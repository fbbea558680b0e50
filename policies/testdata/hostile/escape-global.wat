;; Declares no global, then writes global 0 and 1: after the deadline
;; rewrite these would be the host's injected $stop and $budget (switching
;; the deadline off). Invalid as given; Load must refuse it before any rewrite.
(module
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (loop $forever
      (global.set 0 (i32.const 0))
      (global.set 1 (i32.const 1000000))
      (br $forever))
    (i64.const 1)))
