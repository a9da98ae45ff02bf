;; The render's full-size pixel loops (output.ts's composeRgba, without a background and over a
;; translucent colour, and composeOpaque; full-size-mask.ts's splitAlpha and pasteBlended's
;; `replace` merge; output.ts's foregroundBox and foreground.ts's softBounds) in WebAssembly, most
;; 16 pixels per SIMD step, giving exactly the JavaScript's bytes (render-compose.ts copies the
;; pixels in and out band by band; the JavaScript stays as the reference and the fallback).
;;
;; composeOpaque and splitAlpha are integers only. composeOpaque's JavaScript computes
;; round(c a + bg (1 - a)) in double with a = ai / 255; the exact value is N / 255 with N = c ai + bg (255 - ai), never a half (255 is
;; odd), at least 1/510 from one, where the double's error is ~1e-13: so it rounds as
;; floor((N + 127) / 255) does, and that is (x + (x >> 8)) >> 8 with x = N + 128 for every N up
;; to 255 * 255 (checked for all 2^24 inputs; x + (x >> 8) stays below 65536). splitAlpha's
;; round(m a / 255) is the same with N = m a.
;; Compiled by scripts/build-wasm.mjs (wabt's wat2wasm) into render-compose-wasm.ts; edit here.
;;
;; The compose kernels go in whole steps of 16 pixels: they read and write up to 15 pixels past
;; `n` (and rgba reads 4 bytes more), which the caller leaves as padding and never copies out.
(module
  (import "env" "memory" (memory 1))

  ;; composeRgba without a background: RGBA at $out from the colour (3 bytes per pixel) at $rgb
  ;; and the alpha at $alpha; a pixel whose alpha is 0 is four zero bytes.
  (func (export "rgba") (param $rgb i32) (param $alpha i32) (param $out i32) (param $n i32)
    (local $i i32) (local $a v128) (local $c i32) (local $o i32) (local $p v128)
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $a (v128.load (i32.add (local.get $alpha) (local.get $i))))
        (local.set $c (i32.add (local.get $rgb) (i32.mul (local.get $i) (i32.const 3))))
        (local.set $o (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))))
        ;; 16 transparent pixels (a photo's background, mostly): 64 zero bytes, the colour unread.
        (if (i32.eqz (v128.any_true (local.get $a)))
          (then
            (v128.store (local.get $o) (v128.const i32x4 0 0 0 0))
            (v128.store offset=16 (local.get $o) (v128.const i32x4 0 0 0 0))
            (v128.store offset=32 (local.get $o) (v128.const i32x4 0 0 0 0))
            (v128.store offset=48 (local.get $o) (v128.const i32x4 0 0 0 0))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $step)))
        ;; Each quarter: 12 colour bytes (a load of 16 from its first) and 4 alpha bytes; the
        ;; pixel zeroed where its alpha (the lane's top byte) is 0.
        (local.set $p (i8x16.shuffle 0 1 2 16 3 4 5 17 6 7 8 18 9 10 11 19 (v128.load (local.get $c)) (local.get $a)))
        (v128.store (local.get $o) (v128.andnot (local.get $p) (i32x4.lt_u (local.get $p) (v128.const i32x4 0x1000000 0x1000000 0x1000000 0x1000000))))
        (local.set $p (i8x16.shuffle 0 1 2 20 3 4 5 21 6 7 8 22 9 10 11 23 (v128.load offset=12 (local.get $c)) (local.get $a)))
        (v128.store offset=16 (local.get $o) (v128.andnot (local.get $p) (i32x4.lt_u (local.get $p) (v128.const i32x4 0x1000000 0x1000000 0x1000000 0x1000000))))
        (local.set $p (i8x16.shuffle 0 1 2 24 3 4 5 25 6 7 8 26 9 10 11 27 (v128.load offset=24 (local.get $c)) (local.get $a)))
        (v128.store offset=32 (local.get $o) (v128.andnot (local.get $p) (i32x4.lt_u (local.get $p) (v128.const i32x4 0x1000000 0x1000000 0x1000000 0x1000000))))
        (local.set $p (i8x16.shuffle 0 1 2 28 3 4 5 29 6 7 8 30 9 10 11 31 (v128.load offset=36 (local.get $c)) (local.get $a)))
        (v128.store offset=48 (local.get $o) (v128.andnot (local.get $p) (i32x4.lt_u (local.get $p) (v128.const i32x4 0x1000000 0x1000000 0x1000000 0x1000000))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $step))))

  ;; composeOpaque: the colour at $rgb over the opaque background, into $out (which may be $rgb):
  ;; round((c a + bg (255 - a)) / 255) per byte. $bg: 48 bytes, the background's r g b sixteen
  ;; times (one step's colour bytes). Written out three times, not called: V8 does not inline a
  ;; function here, and the calls made this three times slower (2.0 against 0.66 ms per 1 Mi pixels).
  (func (export "opaque") (param $rgb i32) (param $alpha i32) (param $out i32) (param $n i32) (param $bg i32)
    (local $i i32) (local $c i32) (local $o i32) (local $a v128) (local $av v128) (local $cv v128) (local $rest v128)
    (local $x v128) (local $y v128) (local $bg0 v128) (local $bg1 v128) (local $bg2 v128)
    (local.set $bg0 (v128.load (local.get $bg)))
    (local.set $bg1 (v128.load offset=16 (local.get $bg)))
    (local.set $bg2 (v128.load offset=32 (local.get $bg)))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $a (v128.load (i32.add (local.get $alpha) (local.get $i))))
        (local.set $c (i32.add (local.get $rgb) (i32.mul (local.get $i) (i32.const 3))))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $i) (i32.const 3))))
        ;; Pixels 0-5: each pixel's alpha under its three colour bytes, then per byte
        ;; N + 128 (in 16-bit lanes: at most 65153) and round(N / 255) = (x + (x >> 8)) >> 8.
        (local.set $rest (i8x16.sub (v128.const i8x16 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255)
          (local.tee $av (i8x16.shuffle 0 0 0 1 1 1 2 2 2 3 3 3 4 4 4 5 (local.get $a) (local.get $a)))))
        (local.set $x (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.add (i16x8.extmul_low_i8x16_u (local.tee $cv (v128.load offset=0 (local.get $c))) (local.get $av)) (i16x8.extmul_low_i8x16_u (local.get $bg0) (local.get $rest)))))
        (local.set $y (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.add (i16x8.extmul_high_i8x16_u (local.get $cv) (local.get $av)) (i16x8.extmul_high_i8x16_u (local.get $bg0) (local.get $rest)))))
        (v128.store offset=0 (local.get $o) (i8x16.narrow_i16x8_u
          (i16x8.shr_u (i16x8.add (local.get $x) (i16x8.shr_u (local.get $x) (i32.const 8))) (i32.const 8))
          (i16x8.shr_u (i16x8.add (local.get $y) (i16x8.shr_u (local.get $y) (i32.const 8))) (i32.const 8))))
        ;; Pixels 5-10: each pixel's alpha under its three colour bytes, then per byte
        ;; N + 128 (in 16-bit lanes: at most 65153) and round(N / 255) = (x + (x >> 8)) >> 8.
        (local.set $rest (i8x16.sub (v128.const i8x16 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255)
          (local.tee $av (i8x16.shuffle 5 5 6 6 6 7 7 7 8 8 8 9 9 9 10 10 (local.get $a) (local.get $a)))))
        (local.set $x (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.add (i16x8.extmul_low_i8x16_u (local.tee $cv (v128.load offset=16 (local.get $c))) (local.get $av)) (i16x8.extmul_low_i8x16_u (local.get $bg1) (local.get $rest)))))
        (local.set $y (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.add (i16x8.extmul_high_i8x16_u (local.get $cv) (local.get $av)) (i16x8.extmul_high_i8x16_u (local.get $bg1) (local.get $rest)))))
        (v128.store offset=16 (local.get $o) (i8x16.narrow_i16x8_u
          (i16x8.shr_u (i16x8.add (local.get $x) (i16x8.shr_u (local.get $x) (i32.const 8))) (i32.const 8))
          (i16x8.shr_u (i16x8.add (local.get $y) (i16x8.shr_u (local.get $y) (i32.const 8))) (i32.const 8))))
        ;; Pixels 10-15: each pixel's alpha under its three colour bytes, then per byte
        ;; N + 128 (in 16-bit lanes: at most 65153) and round(N / 255) = (x + (x >> 8)) >> 8.
        (local.set $rest (i8x16.sub (v128.const i8x16 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255)
          (local.tee $av (i8x16.shuffle 10 11 11 11 12 12 12 13 13 13 14 14 14 15 15 15 (local.get $a) (local.get $a)))))
        (local.set $x (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.add (i16x8.extmul_low_i8x16_u (local.tee $cv (v128.load offset=32 (local.get $c))) (local.get $av)) (i16x8.extmul_low_i8x16_u (local.get $bg2) (local.get $rest)))))
        (local.set $y (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.add (i16x8.extmul_high_i8x16_u (local.get $cv) (local.get $av)) (i16x8.extmul_high_i8x16_u (local.get $bg2) (local.get $rest)))))
        (v128.store offset=32 (local.get $o) (i8x16.narrow_i16x8_u
          (i16x8.shr_u (i16x8.add (local.get $x) (i16x8.shr_u (local.get $x) (i32.const 8))) (i32.const 8))
          (i16x8.shr_u (i16x8.add (local.get $y) (i16x8.shr_u (local.get $y) (i32.const 8))) (i32.const 8))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $step))))

  ;; splitAlpha: the RGB of the RGBA at $rgba into $rgb, and the mask at $mask (in place) times
  ;; each pixel's own alpha: round(m a / 255).
  (func (export "split") (param $rgba i32) (param $mask i32) (param $rgb i32) (param $n i32)
    (local $i i32) (local $s i32) (local $o i32) (local $m i32)
    (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128) (local $a v128) (local $k v128) (local $x v128) (local $y v128)
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $s (i32.add (local.get $rgba) (i32.shl (local.get $i) (i32.const 2))))
        (local.set $o (i32.add (local.get $rgb) (i32.mul (local.get $i) (i32.const 3))))
        (local.set $m (i32.add (local.get $mask) (local.get $i)))
        (local.set $v0 (v128.load (local.get $s)))
        (local.set $v1 (v128.load offset=16 (local.get $s)))
        (local.set $v2 (v128.load offset=32 (local.get $s)))
        (local.set $v3 (v128.load offset=48 (local.get $s)))
        (v128.store (local.get $o) (i8x16.shuffle 0 1 2 4 5 6 8 9 10 12 13 14 16 17 18 20 (local.get $v0) (local.get $v1)))
        (v128.store offset=16 (local.get $o) (i8x16.shuffle 5 6 8 9 10 12 13 14 16 17 18 20 21 22 24 25 (local.get $v1) (local.get $v2)))
        (v128.store offset=32 (local.get $o) (i8x16.shuffle 10 12 13 14 16 17 18 20 21 22 24 25 26 28 29 30 (local.get $v2) (local.get $v3)))
        (local.set $a (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
          (i8x16.shuffle 3 7 11 15 19 23 27 31 0 0 0 0 0 0 0 0 (local.get $v0) (local.get $v1))
          (i8x16.shuffle 3 7 11 15 19 23 27 31 0 0 0 0 0 0 0 0 (local.get $v2) (local.get $v3))))
        ;; round(m a / 255) as in opaque (written out: see there).
        (local.set $x (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.extmul_low_i8x16_u (local.tee $k (v128.load (local.get $m))) (local.get $a))))
        (local.set $y (i16x8.add (v128.const i16x8 128 128 128 128 128 128 128 128)
          (i16x8.extmul_high_i8x16_u (local.get $k) (local.get $a))))
        (v128.store (local.get $m) (i8x16.narrow_i16x8_u
          (i16x8.shr_u (i16x8.add (local.get $x) (i16x8.shr_u (local.get $x) (i32.const 8))) (i32.const 8))
          (i16x8.shr_u (i16x8.add (local.get $y) (i16x8.shr_u (local.get $y) (i32.const 8))) (i32.const 8))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $step))))

  ;; foregroundBox and softBounds over $rows rows of $width alpha bytes at $alpha, the first of
  ;; them row $y0 of the image: widens the box at $box (i32 top, bottom, left, right; top = height
  ;; and bottom = -1 when empty) by every pixel whose alpha is in [$lo, $lo + $span] (13..255:
  ;; foregroundBox's; 1..254: softBounds's soft pixels). Each row is read from the left up to its
  ;; first such pixel and from the right down to its last, 16 bytes per test (bits past the row's
  ;; end masked off). Reads up to 15 bytes past the last row.
  (func (export "box") (param $alpha i32) (param $width i32) (param $rows i32) (param $y0 i32) (param $box i32) (param $lo i32) (param $span i32)
    (local $y i32) (local $row i32) (local $x i32) (local $bits i32) (local $first i32) (local $last i32)
    (local $lastChunk i32) (local $lastMask i32) (local $los v128) (local $spans v128)
    (local.set $los (i8x16.splat (local.get $lo)))
    (local.set $spans (i8x16.splat (local.get $span)))
    (local.set $lastChunk (i32.and (i32.sub (local.get $width) (i32.const 1)) (i32.const -16)))
    ;; Bits of the last chunk that lie in the row.
    (local.set $lastMask (i32.sub (i32.shl (i32.const 1) (i32.sub (local.get $width) (local.get $lastChunk))) (i32.const 1)))
    (block $rowsDone
      (loop $rowsLoop
        (br_if $rowsDone (i32.ge_u (local.get $y) (local.get $rows)))
        (local.set $row (i32.add (local.get $alpha) (i32.mul (local.get $y) (local.get $width))))
        (local.set $first (i32.const -1))
        (local.set $x (i32.const 0))
        (block $found
          (loop $scan
            (br_if $found (i32.gt_u (local.get $x) (local.get $lastChunk)))
            (local.set $bits (i8x16.bitmask (i8x16.le_u (i8x16.sub (v128.load (i32.add (local.get $row) (local.get $x))) (local.get $los)) (local.get $spans))))
            (if (i32.eq (local.get $x) (local.get $lastChunk)) (then (local.set $bits (i32.and (local.get $bits) (local.get $lastMask)))))
            (if (local.get $bits)
              (then
                (local.set $first (i32.add (local.get $x) (i32.ctz (local.get $bits))))
                (br $found)))
            (local.set $x (i32.add (local.get $x) (i32.const 16)))
            (br $scan)))
        (if (i32.ge_s (local.get $first) (i32.const 0))
          (then
            ;; From the right: there is a pixel at $first at the latest, so this stops.
            (local.set $x (local.get $lastChunk))
            (local.set $bits (i32.and (local.get $lastMask) (i8x16.bitmask (i8x16.le_u (i8x16.sub (v128.load (i32.add (local.get $row) (local.get $x))) (local.get $los)) (local.get $spans)))))
            (block $back
              (loop $scanBack
                (br_if $back (local.get $bits))
                (local.set $x (i32.sub (local.get $x) (i32.const 16)))
                (local.set $bits (i8x16.bitmask (i8x16.le_u (i8x16.sub (v128.load (i32.add (local.get $row) (local.get $x))) (local.get $los)) (local.get $spans))))
                (br $scanBack)))
            (local.set $last (i32.sub (i32.add (local.get $x) (i32.const 31)) (i32.clz (local.get $bits))))
            (if (i32.lt_s (i32.add (local.get $y0) (local.get $y)) (i32.load (local.get $box)))
              (then (i32.store (local.get $box) (i32.add (local.get $y0) (local.get $y)))))
            (i32.store offset=4 (local.get $box) (i32.add (local.get $y0) (local.get $y)))
            (if (i32.lt_s (local.get $first) (i32.load offset=8 (local.get $box)))
              (then (i32.store offset=8 (local.get $box) (local.get $first))))
            (if (i32.gt_s (local.get $last) (i32.load offset=12 (local.get $box)))
              (then (i32.store offset=12 (local.get $box) (local.get $last))))))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br $rowsLoop))))

  ;; pasteBlended's `replace` merge (full-size-mask.ts) over $rows rows of $width pixels: per
  ;; pixel w = min(row weight, column weight) (f64 each, at $rowW and $colW: the ramps towards the
  ;; region's inner edges, precomputed as the JavaScript computes them), then
  ;; round(w r + (1 - w) b) with b the mask's byte (at $base) and r the region pass's (at $part),
  ;; into $out: in double and in the JavaScript's order, two values per instruction, and rounded as
  ;; Math.round rounds these (floor, plus one where the rest is at least 0.5: exact, as the rest of
  ;; a double is; signed conversions, single x64 instructions, the values being 0..255). Four
  ;; pixels per step: writes up to 3 bytes past each row (the next row's first, made after them)
  ;; and reads up to 8 past $base and $part's rows.
  (func (export "pasteReplace") (param $base i32) (param $part i32) (param $out i32) (param $width i32) (param $rows i32)
    (param $rowW i32) (param $colW i32)
    (local $y i32) (local $x i32) (local $o i32) (local $wy v128) (local $b v128) (local $r v128)
    (local $lo v128) (local $hi v128) (local $w v128) (local $v v128) (local $f v128)
    (block $rowsDone
      (loop $rowsLoop
        (br_if $rowsDone (i32.ge_u (local.get $y) (local.get $rows)))
        (local.set $wy (v128.load64_splat (i32.add (local.get $rowW) (i32.shl (local.get $y) (i32.const 3)))))
        (local.set $o (i32.mul (local.get $y) (local.get $width)))
        (local.set $x (i32.const 0))
        (block $columnsDone
          (loop $columns
            (br_if $columnsDone (i32.ge_u (local.get $x) (local.get $width)))
            ;; four mask and four pass bytes as i32 lanes
            (local.set $b (i32x4.extend_low_i16x8_u (v128.load8x8_u (i32.add (local.get $base) (i32.add (local.get $o) (local.get $x))))))
            (local.set $r (i32x4.extend_low_i16x8_u (v128.load8x8_u (i32.add (local.get $part) (i32.add (local.get $o) (local.get $x))))))
            ;; pixels 0 and 1, then 2 and 3 (written out twice: a call per pair cost more)
            (local.set $w (f64x2.min (local.get $wy) (v128.load (i32.add (local.get $colW) (i32.shl (local.get $x) (i32.const 3))))))
            (local.set $v (f64x2.add (f64x2.mul (local.get $w) (f64x2.convert_low_i32x4_s (local.get $r)))
              (f64x2.mul (f64x2.sub (v128.const f64x2 1 1) (local.get $w)) (f64x2.convert_low_i32x4_s (local.get $b)))))
            (local.set $f (f64x2.floor (local.get $v)))
            (local.set $lo (i32x4.trunc_sat_f64x2_s_zero
              (f64x2.add (local.get $f)
                (v128.and (f64x2.ge (f64x2.sub (local.get $v) (local.get $f)) (v128.const f64x2 0.5 0.5)) (v128.const f64x2 1 1)))))
            (local.set $w (f64x2.min (local.get $wy) (v128.load offset=16 (i32.add (local.get $colW) (i32.shl (local.get $x) (i32.const 3))))))
            (local.set $v (f64x2.add (f64x2.mul (local.get $w) (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 0 0 0 0 0 0 0 0 (local.get $r) (local.get $r))))
              (f64x2.mul (f64x2.sub (v128.const f64x2 1 1) (local.get $w)) (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 0 0 0 0 0 0 0 0 (local.get $b) (local.get $b))))))
            (local.set $f (f64x2.floor (local.get $v)))
            (local.set $hi (i32x4.trunc_sat_f64x2_s_zero
              (f64x2.add (local.get $f)
                (v128.and (f64x2.ge (f64x2.sub (local.get $v) (local.get $f)) (v128.const f64x2 0.5 0.5)) (v128.const f64x2 1 1)))))
            ;; lanes 0 and 1 of each: the four results, 0..255, narrowed to bytes
            (v128.store32_lane 0 (i32.add (local.get $out) (i32.add (local.get $o) (local.get $x)))
              (i8x16.narrow_i16x8_u
                (i16x8.narrow_i32x4_u (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $lo) (local.get $hi)) (local.get $lo))
                (local.get $lo)))
            (local.set $x (i32.add (local.get $x) (i32.const 4)))
            (br $columns)))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br $rowsLoop))))

  ;; composeRgba over a translucent background colour (bg_color with alpha below 1): per pixel,
  ;; from a table of 256 rows of 40 bytes (one per alpha value, made by render-compose.ts with the
  ;; JavaScript's own double expressions): wf, then the background's r g b times wb (f64 each),
  ;; then the output alpha (a byte). Each channel is round(c wf + bg wb), in double and in the
  ;; JavaScript's order, rounded as Math.round rounds these (floor, plus one where the rest is at
  ;; least 0.5). A fully transparent pixel's row is all zeros: four zero bytes, as the JavaScript
  ;; writes. Two pixels per step, their six channels as three pairs of doubles (r0 g0, b0 r1,
  ;; g1 b1); each pixel reads its own row of the table. Reads and writes one pixel past an odd $n.
  ;; Signed conversions, the values being 0..255 either way: x64 has single instructions for them.
  (func (export "overColour") (param $rgb i32) (param $alpha i32) (param $out i32) (param $n i32) (param $table i32)
    (local $i i32) (local $c i32) (local $t0 i32) (local $t1 i32) (local $w0 f64)
    (local $lo v128) (local $hi v128) (local $v v128) (local $f v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $p v128)
    (block $done
      (loop $pair
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $t0 (i32.add (local.get $table) (i32.mul (i32.load8_u (i32.add (local.get $alpha) (local.get $i))) (i32.const 40))))
        (local.set $t1 (i32.add (local.get $table) (i32.mul (i32.load8_u offset=1 (i32.add (local.get $alpha) (local.get $i))) (i32.const 40))))
        (local.set $c (i32.add (local.get $rgb) (i32.mul (local.get $i) (i32.const 3))))
        ;; r0 g0 b0 r1 and g1 b1 as i32 lanes
        (local.set $p (v128.load8x8_u (local.get $c)))
        (local.set $lo (i32x4.extend_low_i16x8_u (local.get $p)))
        (local.set $hi (i32x4.extend_high_i16x8_u (local.get $p)))
        (local.set $w0 (f64.load (local.get $t0)))
        (local.set $v (f64x2.add (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $lo)) (f64x2.splat (local.get $w0))) (v128.load offset=8 (local.get $t0))))
        (local.set $f (f64x2.floor (local.get $v)))
        (local.set $r1 (i32x4.trunc_sat_f64x2_s_zero (f64x2.add (local.get $f)
          (v128.and (f64x2.ge (f64x2.sub (local.get $v) (local.get $f)) (v128.const f64x2 0.5 0.5)) (v128.const f64x2 1 1)))))
        (local.set $v (f64x2.add (f64x2.mul (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 0 0 0 0 0 0 0 0 (local.get $lo) (local.get $lo))) (f64x2.replace_lane 1 (f64x2.splat (local.get $w0)) (f64.load (local.get $t1)))) (v128.load64_lane offset=8 1 (local.get $t1) (v128.load64_zero offset=24 (local.get $t0)))))
        (local.set $f (f64x2.floor (local.get $v)))
        (local.set $r2 (i32x4.trunc_sat_f64x2_s_zero (f64x2.add (local.get $f)
          (v128.and (f64x2.ge (f64x2.sub (local.get $v) (local.get $f)) (v128.const f64x2 0.5 0.5)) (v128.const f64x2 1 1)))))
        (local.set $v (f64x2.add (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $hi)) (f64x2.splat (f64.load (local.get $t1)))) (v128.load offset=16 (local.get $t1))))
        (local.set $f (f64x2.floor (local.get $v)))
        (local.set $r3 (i32x4.trunc_sat_f64x2_s_zero (f64x2.add (local.get $f)
          (v128.and (f64x2.ge (f64x2.sub (local.get $v) (local.get $f)) (v128.const f64x2 0.5 0.5)) (v128.const f64x2 1 1)))))
        ;; R0 G0 B0 R1 G1 B1 (0..255 each) as bytes, the two alphas at 6 and 7, then in RGBA order
        (local.set $p (i8x16.narrow_i16x8_u
          (i16x8.narrow_i32x4_u (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $r1) (local.get $r2)) (local.get $r3))
          (local.get $r3)))
        (local.set $p (i8x16.replace_lane 7 (i8x16.replace_lane 6 (local.get $p) (i32.load8_u offset=32 (local.get $t0))) (i32.load8_u offset=32 (local.get $t1))))
        (v128.store64_lane 0 (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (i8x16.shuffle 0 1 2 6 3 4 5 7 0 0 0 0 0 0 0 0 (local.get $p) (local.get $p)))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair))))
)
