;; wasmsched_decide sleeps 10 s at a time, forever, through WASI poll_oneoff
;; (a clock subscription), i.e. the host's nanosleep.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))
  (func (export "wasmsched_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmsched_decide") (param i32) (result i64)
    ;; subscription at 0: userdata 0, tag 0 (clock), clock id 1 (monotonic),
    ;; timeout 10 s relative, precision 0, flags 0
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 10000000000))
    (loop $forever
      (drop (call $poll_oneoff (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))
      (br $forever))
    (i64.const 1)))
