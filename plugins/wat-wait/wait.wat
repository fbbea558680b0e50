;; wasmsched ABI v1 "wait" serial policy, hand-written in WAT: the proof that
;; the ABI is language-neutral. Same semantics and reasons as plugins/wait:
;; while fewer than max_active (0 read as 1) runs are active, launch the
;; oldest WAITING runs. Build: wat2wasm wait.wat -o wat-wait.wasm
;;
;; Memory: the constant reason at 512, the input buffer at 1024 (fixed for the
;; life of the instance), the output right after the input (8-aligned).
(module
  (memory (export "memory") 1)
  (data (i32.const 512) "oldest waiting run, below max_active")

  (func (export "wasmsched_abi_version") (result i32) (i32.const 1))
  (func (export "wasmsched_kind") (result i32) (i32.const 1))

  ;; $ensure grows memory so that [0, end) is addressable; returns 0 on failure.
  (func $ensure (param $end i64) (result i32)
    (local $have i64)
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (if (i64.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq
              (memory.grow (i32.wrap_i64
                (i64.shr_u (i64.add (i64.sub (local.get $end) (local.get $have)) (i64.const 65535))
                           (i64.const 16))))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 1))

  (func (export "wasmsched_input") (param $size i32) (result i32)
    (if (i32.eqz (call $ensure (i64.add (i64.const 1024) (i64.extend_i32_u (local.get $size)))))
      (then (return (i32.const 0))))
    (i32.const 1024))

  ;; returns out<<32 | out_len, or 1 (ptr 0, code 1) for malformed input
  (func (export "wasmsched_decide") (param $len i32) (result i64)
    (local $max i32) (local $na i32) (local $nw i32) (local $k i32)
    (local $out i32) (local $str i32) (local $i i32) (local $rec i32)
    (local $idoff i32) (local $idlen i32) (local $act i32)
    (if (i32.lt_u (local.get $len) (i32.const 48)) (then (return (i64.const 1))))
    (if (i32.ne (i32.load (i32.const 1024)) (i32.const 1)) (then (return (i64.const 1))))
    (local.set $max (i32.load (i32.const 1028)))
    (if (i32.eqz (local.get $max)) (then (local.set $max (i32.const 1))))
    (local.set $na (i32.load (i32.const 1056)))
    (local.set $nw (i32.load (i32.const 1060)))
    ;; 48 + (na+nw)*48 <= len, in 64 bits
    (if (i64.gt_u
          (i64.add (i64.const 48)
                   (i64.mul (i64.add (i64.extend_i32_u (local.get $na)) (i64.extend_i32_u (local.get $nw)))
                            (i64.const 48)))
          (i64.extend_i32_u (local.get $len)))
      (then (return (i64.const 1))))
    ;; k = min(max - na, nw), 0 if max <= na
    (local.set $k (i32.const 0))
    (if (i32.gt_u (local.get $max) (local.get $na))
      (then (local.set $k (i32.sub (local.get $max) (local.get $na)))))
    (if (i32.gt_u (local.get $k) (local.get $nw)) (then (local.set $k (local.get $nw))))
    ;; output after the input; worst case 16 + k*(20+36) + len bytes
    (local.set $out (i32.and (i32.add (i32.add (i32.const 1024) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (if (i32.eqz (call $ensure
          (i64.add (i64.add (i64.extend_i32_u (local.get $out)) (i64.extend_i32_u (local.get $len)))
                   (i64.add (i64.const 16) (i64.mul (i64.extend_i32_u (local.get $k)) (i64.const 56))))))
      (then (return (i64.const 2))))
    (i32.store (local.get $out) (i32.const 2))
    (i32.store offset=4 (local.get $out) (local.get $k))
    (i64.store offset=8 (local.get $out) (i64.const 0))
    (local.set $str (i32.add (i32.add (local.get $out) (i32.const 16)) (i32.mul (local.get $k) (i32.const 20))))
    (local.set $i (i32.const 0))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $k)))
        ;; waiting run i is record na+i
        (local.set $rec (i32.add (i32.const 1072)
                                 (i32.mul (i32.add (local.get $na) (local.get $i)) (i32.const 48))))
        (local.set $idoff (i32.load offset=32 (local.get $rec)))
        (local.set $idlen (i32.load offset=36 (local.get $rec)))
        (if (i64.gt_u (i64.add (i64.extend_i32_u (local.get $idoff)) (i64.extend_i32_u (local.get $idlen)))
                      (i64.extend_i32_u (local.get $len)))
          (then (return (i64.const 1))))
        (local.set $act (i32.add (i32.add (local.get $out) (i32.const 16)) (i32.mul (local.get $i) (i32.const 20))))
        (i32.store (local.get $act) (i32.const 1)) ;; launch
        (i32.store offset=4 (local.get $act) (i32.sub (local.get $str) (local.get $out)))
        (i32.store offset=8 (local.get $act) (local.get $idlen))
        (memory.copy (local.get $str) (i32.add (i32.const 1024) (local.get $idoff)) (local.get $idlen))
        (local.set $str (i32.add (local.get $str) (local.get $idlen)))
        (i32.store offset=12 (local.get $act) (i32.sub (local.get $str) (local.get $out)))
        (i32.store offset=16 (local.get $act) (i32.const 36))
        (memory.copy (local.get $str) (i32.const 512) (i32.const 36))
        (local.set $str (i32.add (local.get $str) (i32.const 36)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32))
            (i64.extend_i32_u (i32.sub (local.get $str) (local.get $out)))))
)
