;; No wasmsched_input / wasmsched_decide, and decide-less: ErrMissingExport.
(module
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1)))
