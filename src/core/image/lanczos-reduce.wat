;; The inner loop of lanczos-reduce.ts in WebAssembly SIMD: libvips's reduceh_uchar_hwy for
;; 3-channel rows (the same int32 sums of int16 weights times pixels, so the same bytes; the
;; JavaScript stays the reference). Compiled by scripts/build-wasm.mjs into
;; lanczos-reduce-wasm.ts; edit here.
(module
  (import "env" "memory" (memory 1))

  ;; For each of `rows` rows (`srcRow` bytes at `src`, already bordered with copied pixels, so no
  ;; tap is clamped here; `outRow` bytes at `out`), `outWidth` output pixels from a plan of two
  ;; i32 per pixel at `plan`: [its first tap's byte offset in the row, its mask's address]. A
  ;; mask is `groups` * 32 bytes: per 4 taps, (c0 c1) repeated 4 times, then (c2 c3) 4 times
  ;; (int16, zero past the real taps), so the weights are loaded ready to multiply. Per group of 4 taps, one
  ;; 16-byte load holds their 12 bytes; two swizzles make int16 pairs (r0 r1 g0 g1 b0 b1 0 0)
  ;; and (r2 r3 ...), i32x4.dot_i16x8_s with (c0 c1 ...) and (c2 c3 ...) sums them per channel.
  ;; Then (+ 2048) >> 12, saturated to 0..255, and 4 bytes stored (the 4th overwritten by the
  ;; next pixel; the caller leaves a byte after the last row). Reads up to 4 bytes past a
  ;; row's last group (the caller pads the rows).
  (func (export "reduceRows") (param $src i32) (param $srcRow i32) (param $out i32) (param $outRow i32) (param $rows i32) (param $plan i32) (param $outWidth i32) (param $groups i32)
    (local $r i32) (local $s i32) (local $o i32) (local $x i32) (local $pl i32) (local $p i32) (local $k i32) (local $g i32)
    (local $acc v128) (local $v v128)
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $s (i32.add (local.get $src) (i32.mul (local.get $r) (local.get $srcRow))))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $r) (local.get $outRow))))
        (local.set $x (i32.const 0))
        (local.set $pl (local.get $plan))
        (block $colsDone
          (loop $col
            (br_if $colsDone (i32.ge_u (local.get $x) (local.get $outWidth)))
            (local.set $p (i32.add (local.get $s) (i32.load (local.get $pl))))
            (local.set $k (i32.load offset=4 (local.get $pl)))
            (local.set $acc (v128.const i32x4 2048 2048 2048 2048))
            (local.set $g (local.get $groups))
            (loop $group
              (local.set $v (v128.load (local.get $p)))
              (local.set $acc
                (i32x4.add
                  (i32x4.add
                    (local.get $acc)
                    (i32x4.dot_i16x8_s
                      (i8x16.swizzle (local.get $v) (v128.const i8x16 0 0x80 3 0x80 1 0x80 4 0x80 2 0x80 5 0x80 0x80 0x80 0x80 0x80))
                      (v128.load (local.get $k))))
                  (i32x4.dot_i16x8_s
                    (i8x16.swizzle (local.get $v) (v128.const i8x16 6 0x80 9 0x80 7 0x80 10 0x80 8 0x80 11 0x80 0x80 0x80 0x80 0x80))
                    (v128.load offset=16 (local.get $k)))))
              (local.set $p (i32.add (local.get $p) (i32.const 12)))
              (local.set $k (i32.add (local.get $k) (i32.const 32)))
              (local.set $g (i32.sub (local.get $g) (i32.const 1)))
              (br_if $group (local.get $g)))
            (local.set $v (i32x4.shr_s (local.get $acc) (i32.const 12)))
            (local.set $v (i16x8.narrow_i32x4_s (local.get $v) (local.get $v)))
            (v128.store32_lane 0 (local.get $o) (i8x16.narrow_i16x8_u (local.get $v) (local.get $v)))
            (local.set $o (i32.add (local.get $o) (i32.const 3)))
            (local.set $pl (i32.add (local.get $pl) (i32.const 8)))
            (local.set $x (i32.add (local.get $x) (i32.const 1)))
            (br $col)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))

  ;; 8 rows of 8 bytes (at src, src + stride, ...) transposed into 64 bytes at dst:
  ;; dst[i * 8 + r] = src[r * stride + i].
  (func $t8 (param $src i32) (param $stride i32) (param $dst i32)
    (local $a01 v128) (local $a23 v128) (local $a45 v128) (local $a67 v128)
    (local $b0 v128) (local $b1 v128) (local $c0 v128) (local $c1 v128) (local $p i32)
    (local.set $p (local.get $src))
    (local.set $a01 (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23
      (v128.load64_zero (local.get $p)) (v128.load64_zero (i32.add (local.get $p) (local.get $stride)))))
    (local.set $p (i32.add (local.get $p) (i32.shl (local.get $stride) (i32.const 1))))
    (local.set $a23 (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23
      (v128.load64_zero (local.get $p)) (v128.load64_zero (i32.add (local.get $p) (local.get $stride)))))
    (local.set $p (i32.add (local.get $p) (i32.shl (local.get $stride) (i32.const 1))))
    (local.set $a45 (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23
      (v128.load64_zero (local.get $p)) (v128.load64_zero (i32.add (local.get $p) (local.get $stride)))))
    (local.set $p (i32.add (local.get $p) (i32.shl (local.get $stride) (i32.const 1))))
    (local.set $a67 (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23
      (v128.load64_zero (local.get $p)) (v128.load64_zero (i32.add (local.get $p) (local.get $stride)))))
    (local.set $b0 (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $a01) (local.get $a23)))
    (local.set $b1 (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $a01) (local.get $a23)))
    (local.set $c0 (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $a45) (local.get $a67)))
    (local.set $c1 (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $a45) (local.get $a67)))
    (v128.store (local.get $dst) (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $b0) (local.get $c0)))
    (v128.store offset=16 (local.get $dst) (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $b0) (local.get $c0)))
    (v128.store offset=32 (local.get $dst) (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $b1) (local.get $c1)))
    (v128.store offset=48 (local.get $dst) (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $b1) (local.get $c1))))

  ;; The same reduce 8 rows at a time, one row per lane: for each block of 8 rows (the last
  ;; starting at rows - 8, overlapping: rows >= 8), the bordered rows are transposed into `t`
  ;; (element e = pixel * 3 + channel, 8 bytes = the 8 rows), each output element's sum taken
  ;; with every tap's weight for 8 rows at once (a plan of two i32 per output pixel: [its first
  ;; tap's byte offset in `t`, its weights' address]; per tap 32 bytes: int16 (w 0 w 0 ...) then
  ;; (0 w 0 w ...), so i32x4.dot_i16x8_s of the 8 rows gives the even rows' products, then the
  ;; odd rows'), into `u` (element-major, rows in lane order 0 2 4 6 1 3 5 7), then transposed
  ;; back into the output rows 8 bytes at a time (the last 8 overlapping: outRow >= 8).
  ;; `srcRow` must be a multiple of 8 (the caller pads the bordered rows).
  (func (export "reduceBlocks") (param $src i32) (param $srcRow i32) (param $out i32) (param $outRow i32) (param $rows i32) (param $plan i32) (param $outWidth i32) (param $taps i32) (param $t i32) (param $u i32) (param $tmp i32)
    (local $rb i32) (local $last i32) (local $b i32) (local $x i32) (local $pl i32) (local $e i32) (local $w i32) (local $k i32)
    (local $s i32) (local $o i32)
    (local $wE v128) (local $wO v128) (local $v v128)
    (local $r0E v128) (local $r0O v128) (local $r1E v128) (local $r1O v128) (local $r2E v128) (local $r2O v128)
    (local $lastBlock i32) (local $lastChunk i32)
    (block $blocksDone
      (loop $block
        (local.set $lastBlock (i32.ge_s (local.get $rb) (i32.sub (local.get $rows) (i32.const 8))))
        (if (local.get $lastBlock) (then (local.set $rb (i32.sub (local.get $rows) (i32.const 8)))))
        ;; In: the 8 bordered rows, transposed.
        (local.set $b (i32.const 0))
        (block $inDone
          (loop $in
            (br_if $inDone (i32.ge_u (local.get $b) (local.get $srcRow)))
            (call $t8 (i32.add (i32.add (local.get $src) (i32.mul (local.get $rb) (local.get $srcRow))) (local.get $b))
              (local.get $srcRow) (i32.add (local.get $t) (i32.shl (local.get $b) (i32.const 3))))
            (local.set $b (i32.add (local.get $b) (i32.const 8)))
            (br $in)))
        ;; The sums.
        (local.set $x (i32.const 0))
        (local.set $pl (local.get $plan))
        (block $colsDone
          (loop $col
            (br_if $colsDone (i32.ge_u (local.get $x) (local.get $outWidth)))
            (local.set $e (i32.add (local.get $t) (i32.load (local.get $pl))))
            (local.set $w (i32.load offset=4 (local.get $pl)))
            (local.set $r0E (v128.const i32x4 2048 2048 2048 2048))
            (local.set $r0O (local.get $r0E)) (local.set $r1E (local.get $r0E)) (local.set $r1O (local.get $r0E))
            (local.set $r2E (local.get $r0E)) (local.set $r2O (local.get $r0E))
            (local.set $k (local.get $taps))
            (loop $tap
              (local.set $wE (v128.load (local.get $w)))
              (local.set $wO (v128.load offset=16 (local.get $w)))
              (local.set $v (v128.load8x8_u (local.get $e)))
              (local.set $r0E (i32x4.add (local.get $r0E) (i32x4.dot_i16x8_s (local.get $v) (local.get $wE))))
              (local.set $r0O (i32x4.add (local.get $r0O) (i32x4.dot_i16x8_s (local.get $v) (local.get $wO))))
              (local.set $v (v128.load8x8_u offset=8 (local.get $e)))
              (local.set $r1E (i32x4.add (local.get $r1E) (i32x4.dot_i16x8_s (local.get $v) (local.get $wE))))
              (local.set $r1O (i32x4.add (local.get $r1O) (i32x4.dot_i16x8_s (local.get $v) (local.get $wO))))
              (local.set $v (v128.load8x8_u offset=16 (local.get $e)))
              (local.set $r2E (i32x4.add (local.get $r2E) (i32x4.dot_i16x8_s (local.get $v) (local.get $wE))))
              (local.set $r2O (i32x4.add (local.get $r2O) (i32x4.dot_i16x8_s (local.get $v) (local.get $wO))))
              (local.set $e (i32.add (local.get $e) (i32.const 24)))
              (local.set $w (i32.add (local.get $w) (i32.const 32)))
              (local.set $k (i32.sub (local.get $k) (i32.const 1)))
              (br_if $tap (local.get $k)))
            (local.set $o (i32.add (local.get $u) (i32.mul (local.get $x) (i32.const 24))))
            (local.set $v (i16x8.narrow_i32x4_s (i32x4.shr_s (local.get $r0E) (i32.const 12)) (i32x4.shr_s (local.get $r0O) (i32.const 12))))
            (v128.store64_lane 0 (local.get $o) (i8x16.narrow_i16x8_u (local.get $v) (local.get $v)))
            (local.set $v (i16x8.narrow_i32x4_s (i32x4.shr_s (local.get $r1E) (i32.const 12)) (i32x4.shr_s (local.get $r1O) (i32.const 12))))
            (v128.store64_lane offset=8 0 (local.get $o) (i8x16.narrow_i16x8_u (local.get $v) (local.get $v)))
            (local.set $v (i16x8.narrow_i32x4_s (i32x4.shr_s (local.get $r2E) (i32.const 12)) (i32x4.shr_s (local.get $r2O) (i32.const 12))))
            (v128.store64_lane offset=16 0 (local.get $o) (i8x16.narrow_i16x8_u (local.get $v) (local.get $v)))
            (local.set $pl (i32.add (local.get $pl) (i32.const 8)))
            (local.set $x (i32.add (local.get $x) (i32.const 1)))
            (br $col)))
        ;; Out: 8 elements at a time, transposed back to the rows (lane l is row 0 2 4 6 1 3 5 7).
        (local.set $s (i32.const 0))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $rb) (local.get $outRow))))
        (block $outDone
          (loop $chunk
            (local.set $lastChunk (i32.ge_s (local.get $s) (i32.sub (local.get $outRow) (i32.const 8))))
            (if (local.get $lastChunk) (then (local.set $s (i32.sub (local.get $outRow) (i32.const 8)))))
            (call $t8 (i32.add (local.get $u) (i32.shl (local.get $s) (i32.const 3))) (i32.const 8) (local.get $tmp))
            (local.set $e (i32.add (local.get $o) (local.get $s)))
            (i64.store (local.get $e) (i64.load (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (i32.mul (local.get $outRow) (i32.const 2))) (i64.load offset=8 (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (i32.mul (local.get $outRow) (i32.const 4))) (i64.load offset=16 (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (i32.mul (local.get $outRow) (i32.const 6))) (i64.load offset=24 (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (local.get $outRow)) (i64.load offset=32 (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (i32.mul (local.get $outRow) (i32.const 3))) (i64.load offset=40 (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (i32.mul (local.get $outRow) (i32.const 5))) (i64.load offset=48 (local.get $tmp)))
            (i64.store (i32.add (local.get $e) (i32.mul (local.get $outRow) (i32.const 7))) (i64.load offset=56 (local.get $tmp)))
            (br_if $outDone (local.get $lastChunk))
            (local.set $s (i32.add (local.get $s) (i32.const 8)))
            (br $chunk)))
        (br_if $blocksDone (local.get $lastBlock))
        (local.set $rb (i32.add (local.get $rb) (i32.const 8)))
        (br $block))))
)
