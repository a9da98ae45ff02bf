;; upscaleMask's two passes (tensor.ts) in WebAssembly SIMD: the same integer bilinear, exact.
;; The JavaScript computes, per output pixel, line = s0 (256 - wy) + s1 wy along y first, then
;; (line[k] (256 - wx) + line[k + 1] wx + 32768) >>> 16. That is the sum of the four taps times
;; their weight products, an integer, so doing x first and y second gives the same value:
;; row[x] = s[k] (256 - wx) + s[k + 1] wx (at most 255 * 256, an unsigned 16-bit value), then
;; (row0[x] (256 - wy) + row1[x] wy + 32768) >> 16.
;; Compiled by scripts/build-wasm.mjs (wabt's wat2wasm) into mask-upscale-wasm.ts; edit here.
(module
  ;; The caller's memory (mask-upscale.ts lays it out and keeps it between calls).
  (import "env" "memory" (memory 1))

  ;; Along x, one source row at $src into `groups` steps of 8 unsigned 16-bit samples at $dst,
  ;; from a plan of 64 bytes per step, the same for every row:
  ;;   [start, base, pad, pad] (i32: the step's first output column; the 16-byte window of the row
  ;;   it reads from), mask of the left taps (16 bytes: per sample its byte in the window, then
  ;;   0x80, so a swizzle gives zero-extended 16-bit lanes), mask of the right taps, the 8 right
  ;;   weights wx (u16; the left weight is 256 - wx). The last step overlaps the one before where
  ;;   the width is not a multiple of 8 (the same values written twice).
  ;; Reads up to 15 bytes past a window's first byte (the caller leaves memory there).
  (func (export "alongX") (param $src i32) (param $dst i32) (param $plan i32) (param $groups i32)
    (local $q i32) (local $end i32) (local $w v128) (local $wx v128)
    (local.set $q (local.get $plan))
    (local.set $end (i32.add (local.get $plan) (i32.shl (local.get $groups) (i32.const 6))))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $q) (local.get $end)))
        (local.set $w (v128.load (i32.add (local.get $src) (i32.load offset=4 (local.get $q)))))
        (local.set $wx (v128.load offset=48 (local.get $q)))
        ;; At most 255 * 256 per sample: exact in 16-bit lanes (the products and the sum wrap
        ;; modulo 2^16 and the true value is below it).
        (v128.store (i32.add (local.get $dst) (i32.shl (i32.load (local.get $q)) (i32.const 1)))
          (i16x8.add
            (i16x8.mul
              (i8x16.swizzle (local.get $w) (v128.load offset=16 (local.get $q)))
              (i16x8.sub (v128.const i16x8 256 256 256 256 256 256 256 256) (local.get $wx)))
            (i16x8.mul
              (i8x16.swizzle (local.get $w) (v128.load offset=32 (local.get $q)))
              (local.get $wx))))
        (local.set $q (i32.add (local.get $q) (i32.const 64)))
        (br $step))))

  ;; Along y, one output row of `width` bytes at $out from the x-passed rows at $row0 and $row1
  ;; (u16) with weight $wy (0..256): (row0 (256 - wy) + row1 wy + 32768) >> 16, 16 per step.
  ;; Needs width >= 16 (the last step overlaps the one before).
  (func (export "alongY") (param $row0 i32) (param $row1 i32) (param $out i32) (param $width i32) (param $wy i32)
    (local $i i32) (local $last i32) (local $final i32) (local $e i32)
    (local $w0 v128) (local $w1 v128) (local $a v128) (local $b v128) (local $n v128)
    (local.set $w0 (i16x8.splat (i32.sub (i32.const 256) (local.get $wy))))
    (local.set $w1 (i16x8.splat (local.get $wy)))
    (local.set $last (i32.sub (local.get $width) (i32.const 16)))
    (block $done
      (loop $step
        (if (i32.ge_s (local.get $i) (local.get $last))
          (then (local.set $i (local.get $last)) (local.set $final (i32.const 1))))
        (local.set $e (i32.shl (local.get $i) (i32.const 1)))
        ;; samples i .. i+7
        (local.set $a (v128.load (i32.add (local.get $row0) (local.get $e))))
        (local.set $b (v128.load (i32.add (local.get $row1) (local.get $e))))
        (local.set $n
          (i16x8.narrow_i32x4_u
            (i32x4.shr_u
              (i32x4.add
                (i32x4.add (i32x4.extmul_low_i16x8_u (local.get $a) (local.get $w0)) (i32x4.extmul_low_i16x8_u (local.get $b) (local.get $w1)))
                (v128.const i32x4 32768 32768 32768 32768))
              (i32.const 16))
            (i32x4.shr_u
              (i32x4.add
                (i32x4.add (i32x4.extmul_high_i16x8_u (local.get $a) (local.get $w0)) (i32x4.extmul_high_i16x8_u (local.get $b) (local.get $w1)))
                (v128.const i32x4 32768 32768 32768 32768))
              (i32.const 16))))
        ;; samples i+8 .. i+15
        (local.set $a (v128.load offset=16 (i32.add (local.get $row0) (local.get $e))))
        (local.set $b (v128.load offset=16 (i32.add (local.get $row1) (local.get $e))))
        ;; Every value is 0..255: the narrowing is exact.
        (v128.store (i32.add (local.get $out) (local.get $i))
          (i8x16.narrow_i16x8_u
            (local.get $n)
            (i16x8.narrow_i32x4_u
              (i32x4.shr_u
                (i32x4.add
                  (i32x4.add (i32x4.extmul_low_i16x8_u (local.get $a) (local.get $w0)) (i32x4.extmul_low_i16x8_u (local.get $b) (local.get $w1)))
                  (v128.const i32x4 32768 32768 32768 32768))
                (i32.const 16))
              (i32x4.shr_u
                (i32x4.add
                  (i32x4.add (i32x4.extmul_high_i16x8_u (local.get $a) (local.get $w0)) (i32x4.extmul_high_i16x8_u (local.get $b) (local.get $w1)))
                  (v128.const i32x4 32768 32768 32768 32768))
                (i32.const 16)))))
        (br_if $done (local.get $final))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $step))))
)
