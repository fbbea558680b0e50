;; Runaway work without a single loop: wasmsched_decide computes fib(60)
;; by plain recursion (~10^12 calls). Only the function-entry checks of the
;; inline stop flag (or wazero's) can stop it.
(module
  (memory (export "memory") 1)
  (func $fib (param i64) (result i64)
    (if (result i64) (i64.lt_u (local.get 0) (i64.const 2))
      (then (local.get 0))
      (else (i64.add
        (call $fib (i64.sub (local.get 0) (i64.const 1)))
        (call $fib (i64.sub (local.get 0) (i64.const 2)))))))
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (call $fib (i64.const 60))))
