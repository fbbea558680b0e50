;; A version 1 plugin that sends a discard_below (kind 4, seq 2), an action
;; only ABI version 2 has: its decisions are invalid (ErrInvalidDecision,
;; "needs ABI version 2"). The decision record lives at 2048:
;; header {tag 2, n_actions 1, 8 reserved}, action {kind 4, u64 seq 2, reason (0, 0)}.
(module
  (memory (export "memory") 1)
  (data (i32.const 2048) "\02\00\00\00\01\00\00\00\00\00\00\00\00\00\00\00\04\00\00\00\02\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00")
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64) (i64.const 0x0000080000000024)))
