;; Three launches whose reason is the same 9 MiB of guest memory (string
;; references may overlap): copied before the length and membership checks,
;; that was 27 MiB of host heap per call, and more in errors and logs.
(module
  (memory (export "memory") 512)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func $action (param $at i32)
    (i32.store (local.get $at) (i32.const 1))                                 ;; launch
    (i32.store offset=4 (local.get $at) (i32.const 0))
    (i32.store offset=8 (local.get $at) (i32.const 0))
    (i32.store offset=12 (local.get $at) (i32.const 128))
    (i32.store offset=16 (local.get $at) (i32.const 9437184)))
  (func (export "wasmsched_decide") (param i32) (result i64)
    (i32.store (i32.const 65536) (i32.const 2))   ;; tag
    (i32.store (i32.const 65540) (i32.const 3))   ;; n_actions
    (call $action (i32.const 65552))
    (call $action (i32.const 65572))
    (call $action (i32.const 65592))
    (memory.fill (i32.const 65664) (i32.const 120) (i32.const 9437184)) ;; "xxx..."
    (i64.or (i64.shl (i64.const 65536) (i64.const 32)) (i64.const 9437312))))
