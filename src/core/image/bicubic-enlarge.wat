;; The three hot loops of bicubic-enlarge.ts in WebAssembly SIMD, 8 or 16 samples per step (the
;; same integer arithmetic as the JavaScript, which stays the reference and does the edges).
;; Compiled by scripts/build-wasm.mjs (wabt's wat2wasm) into bicubic-enlarge-wasm.ts; edit here.
(module
  ;; The caller's memory: a fresh one per call, sized for the job, so none is kept between calls.
  (import "env" "memory" (memory 1))

  ;; Pass 1 for an axis that does not grow (the half-pixel stencil (-1, 9, 9, -1) / 16 along x):
  ;; for each of `rows` rows of `rowLen` bytes at `src`, the int16 row at `mid` gets, for element
  ;; indices i in [2c, rowLen - c): (9 (s[i-c] + s[i]) - (s[i-2c] + s[i+c]) + 8) >> 4.
  ;; Needs rowLen >= 3c + 8 (the last step overlaps the one before: same values written twice).
  (func (export "halfRows") (param $src i32) (param $mid i32) (param $rows i32) (param $rowLen i32) (param $c i32)
    (local $r i32) (local $s i32) (local $m i32) (local $i i32) (local $last i32) (local $final i32)
    (local $p i32) (local $v v128)
    (local.set $last (i32.sub (i32.sub (local.get $rowLen) (local.get $c)) (i32.const 8)))
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $s (i32.add (local.get $src) (i32.mul (local.get $r) (local.get $rowLen))))
        (local.set $m (i32.add (local.get $mid) (i32.shl (i32.mul (local.get $r) (local.get $rowLen)) (i32.const 1))))
        (local.set $i (i32.shl (local.get $c) (i32.const 1)))
        (local.set $final (i32.const 0))
        (block $done
          (loop $step
            (if (i32.ge_s (local.get $i) (local.get $last))
              (then (local.set $i (local.get $last)) (local.set $final (i32.const 1))))
            (local.set $p (i32.add (local.get $s) (local.get $i)))
            (local.set $v
              (i16x8.shr_s
                (i16x8.add
                  (i16x8.sub
                    (i16x8.mul
                      (i16x8.add
                        (v128.load8x8_u (i32.sub (local.get $p) (local.get $c)))
                        (v128.load8x8_u (local.get $p)))
                      (v128.const i16x8 9 9 9 9 9 9 9 9))
                    (i16x8.add
                      (v128.load8x8_u (i32.sub (local.get $p) (i32.shl (local.get $c) (i32.const 1))))
                      (v128.load8x8_u (i32.add (local.get $p) (local.get $c)))))
                  (v128.const i16x8 8 8 8 8 8 8 8 8))
                (i32.const 4)))
            (v128.store (i32.add (local.get $m) (i32.shl (local.get $i) (i32.const 1))) (local.get $v))
            (br_if $done (local.get $final))
            (local.set $i (i32.add (local.get $i) (i32.const 8)))
            (br $step)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))

  ;; Pass 1 for an axis that grows (along x, the 4-tap Catmull-Rom along each row): for each of
  ;; `rows` rows (`inRow` bytes at `src`, `midRow` int16 at `mid`), `groups` steps of 8 output
  ;; samples each from a plan of 144 bytes per step, the same for every row:
  ;;   [start, base0, base1, pad] (i32: the step's first sample; two 16-byte windows of the row),
  ;;   then per window (samples start..+3 and start+4..+7): two swizzle masks and two weight
  ;;   vectors: mask01 picks (tap0, tap1) of each of the 4 samples from the window as zero-extended
  ;;   int16 pairs (odd bytes 0x80 give 0), weight01 holds their (c0, c1); mask23, weight23 the same
  ;;   for taps 2, 3. i32x4.dot_i16x8_s sums each pair, so a sample is c0 t0 + c1 t1 + c2 t2 + c3 t3,
  ;;   then (+ 2048) >> 12 as int16. The plan's taps are the clamped ones, so edges need no JS.
  ;; Reads up to 15 bytes past a window's first byte (the caller leaves memory there).
  (func (export "colsFromPlan") (param $src i32) (param $mid i32) (param $rows i32) (param $inRow i32) (param $midRow i32) (param $plan i32) (param $groups i32)
    (local $r i32) (local $s i32) (local $m i32) (local $q i32) (local $end i32)
    (local $w v128) (local $lo v128) (local $hi v128)
    (local.set $end (i32.add (local.get $plan) (i32.mul (local.get $groups) (i32.const 144))))
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $s (i32.add (local.get $src) (i32.mul (local.get $r) (local.get $inRow))))
        (local.set $m (i32.add (local.get $mid) (i32.shl (i32.mul (local.get $r) (local.get $midRow)) (i32.const 1))))
        (local.set $q (local.get $plan))
        (block $done
          (loop $step
            (br_if $done (i32.ge_u (local.get $q) (local.get $end)))
            (local.set $w (v128.load (i32.add (local.get $s) (i32.load offset=4 (local.get $q)))))
            (local.set $lo
              (i32x4.shr_s
                (i32x4.add
                  (i32x4.add
                    (i32x4.dot_i16x8_s (i8x16.swizzle (local.get $w) (v128.load offset=16 (local.get $q))) (v128.load offset=48 (local.get $q)))
                    (i32x4.dot_i16x8_s (i8x16.swizzle (local.get $w) (v128.load offset=32 (local.get $q))) (v128.load offset=64 (local.get $q))))
                  (v128.const i32x4 2048 2048 2048 2048))
                (i32.const 12)))
            (local.set $w (v128.load (i32.add (local.get $s) (i32.load offset=8 (local.get $q)))))
            (local.set $hi
              (i32x4.shr_s
                (i32x4.add
                  (i32x4.add
                    (i32x4.dot_i16x8_s (i8x16.swizzle (local.get $w) (v128.load offset=80 (local.get $q))) (v128.load offset=112 (local.get $q)))
                    (i32x4.dot_i16x8_s (i8x16.swizzle (local.get $w) (v128.load offset=96 (local.get $q))) (v128.load offset=128 (local.get $q))))
                  (v128.const i32x4 2048 2048 2048 2048))
                (i32.const 12)))
            (v128.store (i32.add (local.get $m) (i32.shl (i32.load (local.get $q)) (i32.const 1)))
              (i16x8.narrow_i32x4_s (local.get $lo) (local.get $hi)))
            (local.set $q (i32.add (local.get $q) (i32.const 144)))
            (br $step)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))

  ;; Pass 2 (along y), for `outRows` output rows of `rowLen` samples: row y is made from the int16
  ;; rows r0..r3 of `mid` with weights c0..c3 (a plan of 8 int32 per row at `plan`):
  ;; clip((c0 m[r0] + c1 m[r1] + c2 m[r2] + c3 m[r3] + 2048) >> 12) into 8-bit `out`.
  ;; Needs rowLen >= 16 (the last step overlaps the one before).
  (func (export "rowsFromPlan") (param $mid i32) (param $out i32) (param $rowLen i32) (param $outRows i32) (param $plan i32)
    (local $y i32) (local $q i32) (local $o i32) (local $i i32) (local $last i32) (local $final i32)
    (local $p0 i32) (local $p1 i32) (local $p2 i32) (local $p3 i32)
    (local $c0 v128) (local $c1 v128) (local $c2 v128) (local $c3 v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $lo v128) (local $hi v128) (local $n1 v128) (local $e i32)
    (local.set $last (i32.sub (local.get $rowLen) (i32.const 16)))
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $y) (local.get $outRows)))
        (local.set $q (i32.add (local.get $plan) (i32.shl (local.get $y) (i32.const 5))))
        (local.set $p0 (i32.add (local.get $mid) (i32.shl (i32.mul (i32.load offset=0 (local.get $q)) (local.get $rowLen)) (i32.const 1))))
        (local.set $p1 (i32.add (local.get $mid) (i32.shl (i32.mul (i32.load offset=4 (local.get $q)) (local.get $rowLen)) (i32.const 1))))
        (local.set $p2 (i32.add (local.get $mid) (i32.shl (i32.mul (i32.load offset=8 (local.get $q)) (local.get $rowLen)) (i32.const 1))))
        (local.set $p3 (i32.add (local.get $mid) (i32.shl (i32.mul (i32.load offset=12 (local.get $q)) (local.get $rowLen)) (i32.const 1))))
        (local.set $c0 (i16x8.splat (i32.load offset=16 (local.get $q))))
        (local.set $c1 (i16x8.splat (i32.load offset=20 (local.get $q))))
        (local.set $c2 (i16x8.splat (i32.load offset=24 (local.get $q))))
        (local.set $c3 (i16x8.splat (i32.load offset=28 (local.get $q))))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $y) (local.get $rowLen))))
        (local.set $i (i32.const 0))
        (local.set $final (i32.const 0))
        (block $done
          (loop $step
            (if (i32.ge_s (local.get $i) (local.get $last))
              (then (local.set $i (local.get $last)) (local.set $final (i32.const 1))))
            (local.set $e (i32.shl (local.get $i) (i32.const 1)))
            ;; samples i .. i+7
            (local.set $a0 (v128.load (i32.add (local.get $p0) (local.get $e))))
            (local.set $a1 (v128.load (i32.add (local.get $p1) (local.get $e))))
            (local.set $a2 (v128.load (i32.add (local.get $p2) (local.get $e))))
            (local.set $a3 (v128.load (i32.add (local.get $p3) (local.get $e))))
            (local.set $lo
              (i32x4.shr_s
                (i32x4.add
                  (i32x4.add
                    (i32x4.add (i32x4.extmul_low_i16x8_s (local.get $a0) (local.get $c0)) (i32x4.extmul_low_i16x8_s (local.get $a1) (local.get $c1)))
                    (i32x4.add (i32x4.extmul_low_i16x8_s (local.get $a2) (local.get $c2)) (i32x4.extmul_low_i16x8_s (local.get $a3) (local.get $c3))))
                  (v128.const i32x4 2048 2048 2048 2048))
                (i32.const 12)))
            (local.set $hi
              (i32x4.shr_s
                (i32x4.add
                  (i32x4.add
                    (i32x4.add (i32x4.extmul_high_i16x8_s (local.get $a0) (local.get $c0)) (i32x4.extmul_high_i16x8_s (local.get $a1) (local.get $c1)))
                    (i32x4.add (i32x4.extmul_high_i16x8_s (local.get $a2) (local.get $c2)) (i32x4.extmul_high_i16x8_s (local.get $a3) (local.get $c3))))
                  (v128.const i32x4 2048 2048 2048 2048))
                (i32.const 12)))
            (local.set $n1 (i16x8.narrow_i32x4_s (local.get $lo) (local.get $hi)))
            ;; samples i+8 .. i+15
            (local.set $a0 (v128.load offset=16 (i32.add (local.get $p0) (local.get $e))))
            (local.set $a1 (v128.load offset=16 (i32.add (local.get $p1) (local.get $e))))
            (local.set $a2 (v128.load offset=16 (i32.add (local.get $p2) (local.get $e))))
            (local.set $a3 (v128.load offset=16 (i32.add (local.get $p3) (local.get $e))))
            (local.set $lo
              (i32x4.shr_s
                (i32x4.add
                  (i32x4.add
                    (i32x4.add (i32x4.extmul_low_i16x8_s (local.get $a0) (local.get $c0)) (i32x4.extmul_low_i16x8_s (local.get $a1) (local.get $c1)))
                    (i32x4.add (i32x4.extmul_low_i16x8_s (local.get $a2) (local.get $c2)) (i32x4.extmul_low_i16x8_s (local.get $a3) (local.get $c3))))
                  (v128.const i32x4 2048 2048 2048 2048))
                (i32.const 12)))
            (local.set $hi
              (i32x4.shr_s
                (i32x4.add
                  (i32x4.add
                    (i32x4.add (i32x4.extmul_high_i16x8_s (local.get $a0) (local.get $c0)) (i32x4.extmul_high_i16x8_s (local.get $a1) (local.get $c1)))
                    (i32x4.add (i32x4.extmul_high_i16x8_s (local.get $a2) (local.get $c2)) (i32x4.extmul_high_i16x8_s (local.get $a3) (local.get $c3))))
                  (v128.const i32x4 2048 2048 2048 2048))
                (i32.const 12)))
            ;; 0..255 by unsigned saturation: the clip.
            (v128.store (i32.add (local.get $o) (local.get $i))
              (i8x16.narrow_i16x8_u (local.get $n1) (i16x8.narrow_i32x4_s (local.get $lo) (local.get $hi))))
            (br_if $done (local.get $final))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $step)))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br $row))))
)
