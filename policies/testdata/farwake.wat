;; An ABI version 4 serial plugin that launches nothing and asks to be woken
;; at the largest time a wake can carry (i64 max ms: year 292 million):
;; every path that shows a wake must show the one the host keeps (24 h after
;; the decision), never fail to print it. The decision is a constant at 2048:
;; tag 2, one action, flags 0; the action kind 5 (wake) whose 8-byte
;; reference carries the time, and an empty reason.
(module
  (memory (export "memory") 1)
  (data (i32.const 2048)
    "\02\00\00\00" "\01\00\00\00" "\00\00\00\00" "\00\00\00\00"
    "\05\00\00\00" "\ff\ff\ff\ff\ff\ff\ff\7f" "\00\00\00\00\00\00\00\00")
  (func (export "wasmsched_abi_version") (result i32) (i32.const 4))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 36))))
