;; The blur-fusion loops of foreground.ts (boxBlur's two passes, blurFusion's per-pixel loops) in
;; WebAssembly SIMD, two values per instruction, computing what the JavaScript computes bit for
;; bit: the planes hold floats (f32), and every operation is the JavaScript's, in double (f64x2)
;; and in its order, each result rounded to a float where the JavaScript stores it in a
;; Float32Array (f32x4.demote_f64x2_zero rounds to nearest even, as the store does).
;; Compiled by scripts/build-wasm.mjs (wabt's wat2wasm) into foreground-blur-wasm.ts; edit here.
;;
;; Planes are n floats at 16-byte aligned offsets with room for one value past n: the per-pixel
;; loops go two at a time up to n rounded up to even (the odd one past n is the plane's padding,
;; which nothing reads).
(module
  (import "env" "memory" (memory 1))

  ;; blurRow of every row: the box mean (radius r) along x of each of the h rows of w floats at
  ;; $src, into $dst. Two rows per pass (lanes), the last row twice when h is odd (the same values
  ;; written twice). The sum is a double, as in JavaScript: +src where the box grows, +(enter -
  ;; leave) where it is full, +enter then -leave where it shrinks; / count at the ends, * 1/(2r+1)
  ;; in the middle.
  (func (export "blurRows") (param $src i32) (param $dst i32) (param $w i32) (param $h i32) (param $r i32)
    (local $y i32) (local $x i32) (local $sa i32) (local $sb i32) (local $da i32) (local $db i32)
    (local $head i32) (local $tail i32) (local $m i32) (local $count i32)
    (local $sum v128) (local $inv v128) (local $v v128)
    (local.set $m (select (local.get $r) (local.get $w) (i32.lt_s (local.get $r) (local.get $w))))
    (local.set $head (i32.add (local.get $r) (i32.const 1)))
    (if (i32.gt_s (local.get $head) (local.get $w)) (then (local.set $head (local.get $w))))
    (local.set $tail (i32.sub (local.get $w) (local.get $r)))
    (if (i32.lt_s (local.get $tail) (local.get $head)) (then (local.set $tail (local.get $head))))
    (local.set $inv (f64x2.splat (f64.div (f64.const 1) (f64.convert_i32_s (i32.add (i32.shl (local.get $r) (i32.const 1)) (i32.const 1))))))
    (block $rowsDone
      (loop $rows
        (br_if $rowsDone (i32.ge_s (local.get $y) (local.get $h)))
        ;; byte offsets of the two rows
        (local.set $sa (i32.shl (i32.mul (local.get $y) (local.get $w)) (i32.const 2)))
        (local.set $sb (local.get $sa))
        (if (i32.lt_s (i32.add (local.get $y) (i32.const 1)) (local.get $h))
          (then (local.set $sb (i32.add (local.get $sa) (i32.shl (local.get $w) (i32.const 2))))))
        (local.set $da (i32.add (local.get $dst) (local.get $sa)))
        (local.set $db (i32.add (local.get $dst) (local.get $sb)))
        (local.set $sa (i32.add (local.get $src) (local.get $sa)))
        (local.set $sb (i32.add (local.get $src) (local.get $sb)))
        (local.set $sum (v128.const f64x2 0 0))
        (local.set $count (i32.const 0))
        ;; the first min(r, w) values
        (local.set $x (i32.const 0))
        (block $d0 (loop $l0
          (br_if $d0 (i32.ge_s (local.get $x) (local.get $m)))
          (local.set $sum (f64x2.add (local.get $sum)
            (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $sb) (i32.shl (local.get $x) (i32.const 2)))
              (v128.load32_zero (i32.add (local.get $sa) (i32.shl (local.get $x) (i32.const 2))))))))
          (local.set $count (i32.add (local.get $count) (i32.const 1)))
          (local.set $x (i32.add (local.get $x) (i32.const 1)))
          (br $l0)))
        ;; [0, head): the box grows
        (local.set $x (i32.const 0))
        (block $d1 (loop $l1
          (br_if $d1 (i32.ge_s (local.get $x) (local.get $head)))
          (if (i32.lt_s (i32.add (local.get $x) (local.get $r)) (local.get $w))
            (then
              (local.set $sum (f64x2.add (local.get $sum)
                (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $sb) (i32.shl (i32.add (local.get $x) (local.get $r)) (i32.const 2)))
                  (v128.load32_zero (i32.add (local.get $sa) (i32.shl (i32.add (local.get $x) (local.get $r)) (i32.const 2))))))))
              (local.set $count (i32.add (local.get $count) (i32.const 1)))))
          (local.set $v (f32x4.demote_f64x2_zero (f64x2.div (local.get $sum) (f64x2.splat (f64.convert_i32_s (local.get $count))))))
          (v128.store32_lane 0 (i32.add (local.get $da) (i32.shl (local.get $x) (i32.const 2))) (local.get $v))
          (v128.store32_lane 1 (i32.add (local.get $db) (i32.shl (local.get $x) (i32.const 2))) (local.get $v))
          (local.set $x (i32.add (local.get $x) (i32.const 1)))
          (br $l1)))
        ;; [head, tail): the box is full
        (block $d2 (loop $l2
          (br_if $d2 (i32.ge_s (local.get $x) (local.get $tail)))
          (local.set $sum (f64x2.add (local.get $sum)
            (f64x2.sub
              (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $sb) (i32.shl (i32.add (local.get $x) (local.get $r)) (i32.const 2)))
                (v128.load32_zero (i32.add (local.get $sa) (i32.shl (i32.add (local.get $x) (local.get $r)) (i32.const 2))))))
              (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $sb) (i32.shl (i32.sub (i32.sub (local.get $x) (local.get $r)) (i32.const 1)) (i32.const 2)))
                (v128.load32_zero (i32.add (local.get $sa) (i32.shl (i32.sub (i32.sub (local.get $x) (local.get $r)) (i32.const 1)) (i32.const 2)))))))))
          (local.set $v (f32x4.demote_f64x2_zero (f64x2.mul (local.get $sum) (local.get $inv))))
          (v128.store32_lane 0 (i32.add (local.get $da) (i32.shl (local.get $x) (i32.const 2))) (local.get $v))
          (v128.store32_lane 1 (i32.add (local.get $db) (i32.shl (local.get $x) (i32.const 2))) (local.get $v))
          (local.set $x (i32.add (local.get $x) (i32.const 1)))
          (br $l2)))
        ;; [tail, w): the box shrinks
        (block $d3 (loop $l3
          (br_if $d3 (i32.ge_s (local.get $x) (local.get $w)))
          (if (i32.lt_s (i32.add (local.get $x) (local.get $r)) (local.get $w))
            (then
              (local.set $sum (f64x2.add (local.get $sum)
                (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $sb) (i32.shl (i32.add (local.get $x) (local.get $r)) (i32.const 2)))
                  (v128.load32_zero (i32.add (local.get $sa) (i32.shl (i32.add (local.get $x) (local.get $r)) (i32.const 2))))))))
              (local.set $count (i32.add (local.get $count) (i32.const 1)))))
          (if (i32.gt_s (local.get $x) (local.get $r))
            (then
              (local.set $sum (f64x2.sub (local.get $sum)
                (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $sb) (i32.shl (i32.sub (i32.sub (local.get $x) (local.get $r)) (i32.const 1)) (i32.const 2)))
                  (v128.load32_zero (i32.add (local.get $sa) (i32.shl (i32.sub (i32.sub (local.get $x) (local.get $r)) (i32.const 1)) (i32.const 2))))))))
              (local.set $count (i32.sub (local.get $count) (i32.const 1)))))
          (local.set $v (f32x4.demote_f64x2_zero (f64x2.div (local.get $sum) (f64x2.splat (f64.convert_i32_s (local.get $count))))))
          (v128.store32_lane 0 (i32.add (local.get $da) (i32.shl (local.get $x) (i32.const 2))) (local.get $v))
          (v128.store32_lane 1 (i32.add (local.get $db) (i32.shl (local.get $x) (i32.const 2))) (local.get $v))
          (local.set $x (i32.add (local.get $x) (i32.const 1)))
          (br $l3)))
        (local.set $y (i32.add (local.get $y) (i32.const 2)))
        (br $rows))))

  ;; boxBlur's column pass: running column sums (doubles, w of them at $cols, with room for one
  ;; more) of the row-blurred plane at $tmp, the mean of each box written to $out. Two columns
  ;; per step, w rounded up to even: the extra column reads the next row's first value (or the
  ;; plane's padding) into the extra sum, and its write is overwritten by the next row's (or
  ;; lands in the padding).
  (func (export "blurColumns") (param $tmp i32) (param $out i32) (param $cols i32) (param $w i32) (param $h i32) (param $r i32)
    (local $y i32) (local $x i32) (local $we i32) (local $count i32) (local $enter i32) (local $leave i32)
    (local $row i32) (local $c i32) (local $sum v128) (local $inv v128)
    (local.set $we (i32.and (i32.add (local.get $w) (i32.const 1)) (i32.const -2)))
    ;; columns.fill(0)
    (local.set $x (i32.const 0))
    (block $z (loop $lz
      (br_if $z (i32.ge_s (local.get $x) (local.get $we)))
      (v128.store (i32.add (local.get $cols) (i32.shl (local.get $x) (i32.const 3))) (v128.const f64x2 0 0))
      (local.set $x (i32.add (local.get $x) (i32.const 2)))
      (br $lz)))
    ;; the first min(r, h) rows
    (block $d0 (loop $l0
      (br_if $d0 (i32.ge_s (local.get $y) (select (local.get $r) (local.get $h) (i32.lt_s (local.get $r) (local.get $h)))))
      (local.set $row (i32.add (local.get $tmp) (i32.shl (i32.mul (local.get $y) (local.get $w)) (i32.const 2))))
      (local.set $x (i32.const 0))
      (block $d1 (loop $l1
        (br_if $d1 (i32.ge_s (local.get $x) (local.get $we)))
        (local.set $c (i32.add (local.get $cols) (i32.shl (local.get $x) (i32.const 3))))
        (v128.store (local.get $c) (f64x2.add (v128.load (local.get $c))
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $row) (i32.shl (local.get $x) (i32.const 2)))))))
        (local.set $x (i32.add (local.get $x) (i32.const 2)))
        (br $l1)))
      (local.set $count (i32.add (local.get $count) (i32.const 1)))
      (local.set $y (i32.add (local.get $y) (i32.const 1)))
      (br $l0)))
    (local.set $y (i32.const 0))
    (block $done (loop $rows
      (br_if $done (i32.ge_s (local.get $y) (local.get $h)))
      (local.set $enter (i32.lt_s (i32.add (local.get $y) (local.get $r)) (local.get $h)))
      (local.set $leave (i32.ge_s (i32.sub (i32.sub (local.get $y) (local.get $r)) (i32.const 1)) (i32.const 0)))
      (if (local.get $enter) (then (local.set $count (i32.add (local.get $count) (i32.const 1)))))
      (if (local.get $leave) (then (local.set $count (i32.sub (local.get $count) (i32.const 1)))))
      (local.set $inv (f64x2.splat (f64.div (f64.const 1) (f64.convert_i32_s (local.get $count)))))
      (local.set $x (i32.const 0))
      (block $d2 (loop $l2
        (br_if $d2 (i32.ge_s (local.get $x) (local.get $we)))
        (local.set $c (i32.add (local.get $cols) (i32.shl (local.get $x) (i32.const 3))))
        (local.set $sum (v128.load (local.get $c)))
        ;; (columns + entering) - leaving, as the JavaScript adds them
        (if (local.get $enter)
          (then (local.set $sum (f64x2.add (local.get $sum)
            (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $tmp)
              (i32.shl (i32.add (i32.mul (i32.add (local.get $y) (local.get $r)) (local.get $w)) (local.get $x)) (i32.const 2)))))))))
        (if (local.get $leave)
          (then (local.set $sum (f64x2.sub (local.get $sum)
            (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $tmp)
              (i32.shl (i32.add (i32.mul (i32.sub (i32.sub (local.get $y) (local.get $r)) (i32.const 1)) (local.get $w)) (local.get $x)) (i32.const 2)))))))))
        (v128.store (local.get $c) (local.get $sum))
        (v128.store64_lane 0 (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $y) (local.get $w)) (local.get $x)) (i32.const 2)))
          (f32x4.demote_f64x2_zero (f64x2.mul (local.get $sum) (local.get $inv))))
        (local.set $x (i32.add (local.get $x) (i32.const 2)))
        (br $l2)))
      (local.set $y (i32.add (local.get $y) (i32.const 1)))
      (br $rows))))

  ;; invA = 1 / (blurredA + 1e-5), invB = 1 / (1 - blurredA + 1e-5)
  (func (export "inverses") (param $ba i32) (param $ia i32) (param $ib i32) (param $n i32)
    (local $i i32) (local $b v128)
    (block $done (loop $l
      (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
      (local.set $b (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $ba) (i32.shl (local.get $i) (i32.const 2))))))
      (v128.store64_lane 0 (i32.add (local.get $ia) (i32.shl (local.get $i) (i32.const 2)))
        (f32x4.demote_f64x2_zero (f64x2.div (v128.const f64x2 1 1) (f64x2.add (local.get $b) (v128.const f64x2 1e-5 1e-5)))))
      (v128.store64_lane 0 (i32.add (local.get $ib) (i32.shl (local.get $i) (i32.const 2)))
        (f32x4.demote_f64x2_zero (f64x2.div (v128.const f64x2 1 1) (f64x2.add (f64x2.sub (v128.const f64x2 1 1) (local.get $b)) (v128.const f64x2 1e-5 1e-5)))))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $l))))

  ;; out = f * a (the foreground weighted by alpha)
  (func (export "weightByAlpha") (param $f i32) (param $a i32) (param $out i32) (param $n i32)
    (local $i i32) (local $o i32)
    (block $done (loop $l
      (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
      (local.set $o (i32.shl (local.get $i) (i32.const 2)))
      (v128.store64_lane 0 (i32.add (local.get $out) (local.get $o))
        (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $f) (local.get $o))))
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (local.get $o)))))))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $l))))

  ;; out = b * (1 - a) (the background weighted by its share)
  (func (export "weightByRest") (param $b i32) (param $a i32) (param $out i32) (param $n i32)
    (local $i i32) (local $o i32)
    (block $done (loop $l
      (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
      (local.set $o (i32.shl (local.get $i) (i32.const 2)))
      (v128.store64_lane 0 (i32.add (local.get $out) (local.get $o))
        (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $b) (local.get $o))))
          (f64x2.sub (v128.const f64x2 1 1) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (local.get $o))))))))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $l))))

  ;; The first pass's foreground, in place: fi = bf invA, bi = bb invB (unrounded), bb = bi,
  ;; bf = clamp(fi + a (ic - a fi - (1 - a) bi), 0, 1).
  (func (export "foreground") (param $bf i32) (param $bb i32) (param $ia i32) (param $ib i32) (param $a i32) (param $ic i32) (param $n i32)
    (local $i i32) (local $o i32) (local $fi v128) (local $bi v128) (local $ai v128)
    (block $done (loop $l
      (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
      (local.set $o (i32.shl (local.get $i) (i32.const 2)))
      (local.set $fi (f64x2.mul
        (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $bf) (local.get $o))))
        (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $ia) (local.get $o))))))
      (local.set $bi (f64x2.mul
        (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $bb) (local.get $o))))
        (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $ib) (local.get $o))))))
      (v128.store64_lane 0 (i32.add (local.get $bb) (local.get $o)) (f32x4.demote_f64x2_zero (local.get $bi)))
      (local.set $ai (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (local.get $o)))))
      ;; value < 0 ? 0 : value > 1 ? 1 : value (pmax, pmin: the same comparisons)
      (v128.store64_lane 0 (i32.add (local.get $bf) (local.get $o))
        (f32x4.demote_f64x2_zero
          (f64x2.pmin
            (f64x2.pmax
              (f64x2.add (local.get $fi)
                (f64x2.mul (local.get $ai)
                  (f64x2.sub
                    (f64x2.sub
                      (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $ic) (local.get $o))))
                      (f64x2.mul (local.get $ai) (local.get $fi)))
                    (f64x2.mul (f64x2.sub (v128.const f64x2 1 1) (local.get $ai)) (local.get $bi)))))
              (v128.const f64x2 0 0))
            (v128.const f64x2 1 1))))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $l))))

  ;; The blurred estimates kept as they are (a pass with keep 'blurred'), in place: bf = bf invA, bb = bb invB.
  (func (export "divideOut") (param $bf i32) (param $bb i32) (param $ia i32) (param $ib i32) (param $n i32)
    (local $i i32) (local $o i32)
    (block $done (loop $l
      (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
      (local.set $o (i32.shl (local.get $i) (i32.const 2)))
      (v128.store64_lane 0 (i32.add (local.get $bf) (local.get $o))
        (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $bf) (local.get $o))))
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $ia) (local.get $o)))))))
      (v128.store64_lane 0 (i32.add (local.get $bb) (local.get $o))
        (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $bb) (local.get $o))))
          (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $ib) (local.get $o)))))))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $l))))
  ;; ---- The per-pixel correction (estimateForeground's last loop) over a list of soft pixels ----

  ;; The band-relative indices of the soft bytes (0 < alpha < 255) among `count` alpha bytes at
  ;; $alpha, written to $list (i32); returns how many. Sixteen opaque or transparent bytes are
  ;; passed over at a time.
  (func (export "softList") (param $alpha i32) (param $count i32) (param $list i32) (result i32)
    (local $i i32) (local $k i32) (local $end i32) (local $v v128) (local $a i32)
    (local.set $end (i32.sub (local.get $count) (i32.const 16)))
    (block $vdone (loop $vl
      (br_if $vdone (i32.gt_s (local.get $i) (local.get $end)))
      (local.set $v (v128.load (i32.add (local.get $alpha) (local.get $i))))
      (if (i32.eqz (i8x16.all_true (v128.or (i8x16.eq (local.get $v) (v128.const i8x16 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0))
                                            (i8x16.eq (local.get $v) (v128.const i8x16 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255 255)))))
        (then
          (local.set $a (i32.add (local.get $i) (i32.const 16)))
          (block $sdone (loop $sl
            (br_if $sdone (i32.ge_s (local.get $i) (local.get $a)))
            (if (i32.lt_u (i32.sub (i32.load8_u (i32.add (local.get $alpha) (local.get $i))) (i32.const 1)) (i32.const 254))
              (then
                (i32.store (i32.add (local.get $list) (i32.shl (local.get $k) (i32.const 2))) (local.get $i))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $sl))))
        (else (local.set $i (i32.add (local.get $i) (i32.const 16)))))
      (br $vl)))
    (block $tdone (loop $tl
      (br_if $tdone (i32.ge_s (local.get $i) (local.get $count)))
      (if (i32.lt_u (i32.sub (i32.load8_u (i32.add (local.get $alpha) (local.get $i))) (i32.const 1)) (i32.const 254))
        (then
          (i32.store (i32.add (local.get $list) (i32.shl (local.get $k) (i32.const 2))) (local.get $i))
          (local.set $k (i32.add (local.get $k) (i32.const 1)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $tl)))
    (local.get $k))

  ;; The correction at the k soft pixels listed at $list (band-relative indices, rows of $width
  ;; pixels; their colour gathered at $vals, 3 bytes each, corrected in place there). Per band row
  ;; at $rows (16 bytes): the box-relative plane index of its upper and lower taps' rows (i32 x 2)
  ;; and ty (f64); per soft-box column at $cols (16 bytes, from column $left): the left and right
  ;; taps' box-relative columns (i32 x 2) and tx (f64). F0..B2: the second pass's planes.
  ;; Each channel is foreground.ts's `correct`, in double, in the JavaScript's order:
  ;; fb = 255 (F00 w00 + F01 w01 + F10 w10 + F11 w11), bg likewise from B (the two side by side,
  ;; lanes 0 and 1), f = fb + al (value - al fb - (1 - al) bg), then 0 at or below 0, 255 at or
  ;; above 255, else Math.round (the nearer integer, halves up: floor, plus one where
  ;; f - floor(f) >= 0.5; f64.nearest would round halves to even). Written out for the three
  ;; channels: a call per channel cost more than the arithmetic.
  (func (export "correctList") (param $list i32) (param $k i32) (param $width i32) (param $left i32)
    (param $rows i32) (param $cols i32) (param $alpha i32) (param $vals i32)
    (param $F0 i32) (param $F1 i32) (param $F2 i32) (param $B0 i32) (param $B1 i32) (param $B2 i32)
    (local $j i32) (local $idx i32) (local $y i32) (local $q i32) (local $c i32) (local $v i32)
    (local $r0 i32) (local $r1 i32) (local $x0 i32) (local $x1 i32)
    (local $tx f64) (local $ty f64) (local $al f64)
    (local $w00 v128) (local $w01 v128) (local $w10 v128) (local $w11 v128)
    (local $p00 i32) (local $p01 i32) (local $p10 i32) (local $p11 i32)
    (local $fbg v128) (local $fb f64) (local $f f64) (local $r f64)
    (block $done (loop $l
      (br_if $done (i32.ge_s (local.get $j) (local.get $k)))
      (local.set $idx (i32.load (i32.add (local.get $list) (i32.shl (local.get $j) (i32.const 2)))))
      (local.set $y (i32.div_u (local.get $idx) (local.get $width)))
      (local.set $q (i32.add (local.get $rows) (i32.shl (local.get $y) (i32.const 4))))
      (local.set $r0 (i32.load (local.get $q)))
      (local.set $r1 (i32.load offset=4 (local.get $q)))
      (local.set $ty (f64.load offset=8 (local.get $q)))
      (local.set $c (i32.add (local.get $cols)
        (i32.shl (i32.sub (i32.sub (local.get $idx) (i32.mul (local.get $y) (local.get $width))) (local.get $left)) (i32.const 4))))
      (local.set $x0 (i32.load (local.get $c)))
      (local.set $x1 (i32.load offset=4 (local.get $c)))
      (local.set $tx (f64.load offset=8 (local.get $c)))
      ;; byte offsets into the planes
      (local.set $p00 (i32.shl (i32.add (local.get $r0) (local.get $x0)) (i32.const 2)))
      (local.set $p01 (i32.shl (i32.add (local.get $r0) (local.get $x1)) (i32.const 2)))
      (local.set $p10 (i32.shl (i32.add (local.get $r1) (local.get $x0)) (i32.const 2)))
      (local.set $p11 (i32.shl (i32.add (local.get $r1) (local.get $x1)) (i32.const 2)))
      (local.set $w00 (f64x2.splat (f64.mul (f64.sub (f64.const 1) (local.get $tx)) (f64.sub (f64.const 1) (local.get $ty)))))
      (local.set $w01 (f64x2.splat (f64.mul (local.get $tx) (f64.sub (f64.const 1) (local.get $ty)))))
      (local.set $w10 (f64x2.splat (f64.mul (f64.sub (f64.const 1) (local.get $tx)) (local.get $ty))))
      (local.set $w11 (f64x2.splat (f64.mul (local.get $tx) (local.get $ty))))
      (local.set $al (f64.div (f64.convert_i32_u (i32.load8_u (i32.add (local.get $alpha) (local.get $idx)))) (f64.const 255)))
      (local.set $v (i32.add (local.get $vals) (i32.mul (local.get $j) (i32.const 3))))
      ;; channel 0: fb and bg side by side, then the JavaScript's formula and Math.round
      (local.set $fbg (f64x2.mul (v128.const f64x2 255 255)
        (f64x2.add (f64x2.add (f64x2.add
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B0) (local.get $p00)) (v128.load32_zero (i32.add (local.get $F0) (local.get $p00))))) (local.get $w00))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B0) (local.get $p01)) (v128.load32_zero (i32.add (local.get $F0) (local.get $p01))))) (local.get $w01)))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B0) (local.get $p10)) (v128.load32_zero (i32.add (local.get $F0) (local.get $p10))))) (local.get $w10)))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B0) (local.get $p11)) (v128.load32_zero (i32.add (local.get $F0) (local.get $p11))))) (local.get $w11)))))
      (local.set $fb (f64x2.extract_lane 0 (local.get $fbg)))
      (local.set $f (f64.add (local.get $fb)
        (f64.mul (local.get $al)
          (f64.sub (f64.sub (f64.convert_i32_u (i32.load8_u (local.get $v))) (f64.mul (local.get $al) (local.get $fb)))
            (f64.mul (f64.sub (f64.const 1) (local.get $al)) (f64x2.extract_lane 1 (local.get $fbg)))))))
      (local.set $r (f64.floor (local.get $f)))
      (i32.store8 (local.get $v)
        (if (result i32) (f64.le (local.get $f) (f64.const 0))
          (then (i32.const 0))
          (else (if (result i32) (f64.ge (local.get $f) (f64.const 255))
            (then (i32.const 255))
            (else (i32.trunc_sat_f64_u
              (select (f64.add (local.get $r) (f64.const 1)) (local.get $r) (f64.ge (f64.sub (local.get $f) (local.get $r)) (f64.const 0.5)))))))))
      ;; channel 1: fb and bg side by side, then the JavaScript's formula and Math.round
      (local.set $fbg (f64x2.mul (v128.const f64x2 255 255)
        (f64x2.add (f64x2.add (f64x2.add
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B1) (local.get $p00)) (v128.load32_zero (i32.add (local.get $F1) (local.get $p00))))) (local.get $w00))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B1) (local.get $p01)) (v128.load32_zero (i32.add (local.get $F1) (local.get $p01))))) (local.get $w01)))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B1) (local.get $p10)) (v128.load32_zero (i32.add (local.get $F1) (local.get $p10))))) (local.get $w10)))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B1) (local.get $p11)) (v128.load32_zero (i32.add (local.get $F1) (local.get $p11))))) (local.get $w11)))))
      (local.set $fb (f64x2.extract_lane 0 (local.get $fbg)))
      (local.set $f (f64.add (local.get $fb)
        (f64.mul (local.get $al)
          (f64.sub (f64.sub (f64.convert_i32_u (i32.load8_u offset=1 (local.get $v))) (f64.mul (local.get $al) (local.get $fb)))
            (f64.mul (f64.sub (f64.const 1) (local.get $al)) (f64x2.extract_lane 1 (local.get $fbg)))))))
      (local.set $r (f64.floor (local.get $f)))
      (i32.store8 offset=1 (local.get $v)
        (if (result i32) (f64.le (local.get $f) (f64.const 0))
          (then (i32.const 0))
          (else (if (result i32) (f64.ge (local.get $f) (f64.const 255))
            (then (i32.const 255))
            (else (i32.trunc_sat_f64_u
              (select (f64.add (local.get $r) (f64.const 1)) (local.get $r) (f64.ge (f64.sub (local.get $f) (local.get $r)) (f64.const 0.5)))))))))
      ;; channel 2: fb and bg side by side, then the JavaScript's formula and Math.round
      (local.set $fbg (f64x2.mul (v128.const f64x2 255 255)
        (f64x2.add (f64x2.add (f64x2.add
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B2) (local.get $p00)) (v128.load32_zero (i32.add (local.get $F2) (local.get $p00))))) (local.get $w00))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B2) (local.get $p01)) (v128.load32_zero (i32.add (local.get $F2) (local.get $p01))))) (local.get $w01)))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B2) (local.get $p10)) (v128.load32_zero (i32.add (local.get $F2) (local.get $p10))))) (local.get $w10)))
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (local.get $B2) (local.get $p11)) (v128.load32_zero (i32.add (local.get $F2) (local.get $p11))))) (local.get $w11)))))
      (local.set $fb (f64x2.extract_lane 0 (local.get $fbg)))
      (local.set $f (f64.add (local.get $fb)
        (f64.mul (local.get $al)
          (f64.sub (f64.sub (f64.convert_i32_u (i32.load8_u offset=2 (local.get $v))) (f64.mul (local.get $al) (local.get $fb)))
            (f64.mul (f64.sub (f64.const 1) (local.get $al)) (f64x2.extract_lane 1 (local.get $fbg)))))))
      (local.set $r (f64.floor (local.get $f)))
      (i32.store8 offset=2 (local.get $v)
        (if (result i32) (f64.le (local.get $f) (f64.const 0))
          (then (i32.const 0))
          (else (if (result i32) (f64.ge (local.get $f) (f64.const 255))
            (then (i32.const 255))
            (else (i32.trunc_sat_f64_u
              (select (f64.add (local.get $r) (f64.const 1)) (local.get $r) (f64.ge (f64.sub (local.get $f) (local.get $r)) (f64.const 0.5)))))))))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $l))))
  ;; foreground.ts's secondAt: the second pass's blurred foreground and background at one point p
  ;; of the box's planes, as the JavaScript computes them (its sums in its order, each product and
  ;; mean rounded to a float where it rounds them). The planes and sizes come from a context block
  ;; at $ctx (i32 each): f0 f1 f2 b0 b1 b2 a F0 F1 F2 B0 B1 B2 done w h radius. Lanes: (f0, f1) by a,
  ;; (f2, b0) by (a, 1 - a), (b1, b2) by 1 - a; the alpha's sum apart.
  (func $secondAt (param $ctx i32) (param $p i32)
    (local $w i32) (local $h i32) (local $r i32) (local $px i32) (local $py i32)
    (local $x0 i32) (local $x1 i32) (local $y0 i32) (local $y1 i32) (local $head i32) (local $tail i32) (local $full i32)
    (local $y i32) (local $q i32) (local $end i32) (local $o i32)
    (local $inv f64) (local $count f64) (local $sa f64) (local $ra f64) (local $aq f64) (local $rowsInv f64)
    (local $blurredA f64) (local $invA f64) (local $invB f64) (local $div v128)
    (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128)
    (local $av v128) (local $ov v128)
    (local.set $w (i32.load offset=56 (local.get $ctx)))
    (local.set $h (i32.load offset=60 (local.get $ctx)))
    (local.set $r (i32.load offset=64 (local.get $ctx)))
    (local.set $px (i32.rem_u (local.get $p) (local.get $w)))
    (local.set $py (i32.div_u (local.get $p) (local.get $w)))
    (local.set $x0 (i32.sub (local.get $px) (local.get $r)))
    (if (i32.lt_s (local.get $x0) (i32.const 0)) (then (local.set $x0 (i32.const 0))))
    (local.set $x1 (i32.add (local.get $px) (local.get $r)))
    (if (i32.gt_s (local.get $x1) (i32.sub (local.get $w) (i32.const 1))) (then (local.set $x1 (i32.sub (local.get $w) (i32.const 1)))))
    (local.set $y0 (i32.sub (local.get $py) (local.get $r)))
    (if (i32.lt_s (local.get $y0) (i32.const 0)) (then (local.set $y0 (i32.const 0))))
    (local.set $y1 (i32.add (local.get $py) (local.get $r)))
    (if (i32.gt_s (local.get $y1) (i32.sub (local.get $h) (i32.const 1))) (then (local.set $y1 (i32.sub (local.get $h) (i32.const 1)))))
    (local.set $head (i32.add (local.get $r) (i32.const 1)))
    (if (i32.gt_s (local.get $head) (local.get $w)) (then (local.set $head (local.get $w))))
    (local.set $tail (i32.sub (local.get $w) (local.get $r)))
    (if (i32.lt_s (local.get $tail) (local.get $head)) (then (local.set $tail (local.get $head))))
    (local.set $full (i32.and (i32.ge_s (local.get $px) (local.get $head)) (i32.lt_s (local.get $px) (local.get $tail))))
    (local.set $inv (f64.div (f64.const 1) (f64.convert_i32_s (i32.add (i32.shl (local.get $r) (i32.const 1)) (i32.const 1)))))
    (local.set $count (f64.convert_i32_s (i32.add (i32.sub (local.get $x1) (local.get $x0)) (i32.const 1))))
    (local.set $s1 (v128.const f64x2 0 0))
    (local.set $s2 (v128.const f64x2 0 0))
    (local.set $s3 (v128.const f64x2 0 0))
    (local.set $y (local.get $y0))
    (block $rowsDone (loop $rows
      (br_if $rowsDone (i32.gt_s (local.get $y) (local.get $y1)))
      (local.set $ra (f64.const 0))
      (local.set $r1 (v128.const f64x2 0 0))
      (local.set $r2 (v128.const f64x2 0 0))
      (local.set $r3 (v128.const f64x2 0 0))
      (local.set $q (i32.add (i32.mul (local.get $y) (local.get $w)) (local.get $x0)))
      (local.set $end (i32.add (i32.mul (local.get $y) (local.get $w)) (local.get $x1)))
      (block $done (loop $cols
        (br_if $done (i32.gt_s (local.get $q) (local.get $end)))
        (local.set $o (i32.shl (local.get $q) (i32.const 2)))
        (local.set $aq (f64.promote_f32 (f32.load (i32.add (i32.load offset=24 (local.get $ctx)) (local.get $o)))))
        (local.set $ra (f64.add (local.get $ra) (local.get $aq)))
        (local.set $av (f64x2.splat (local.get $aq)))
        (local.set $ov (f64x2.splat (f64.sub (f64.const 1) (local.get $aq))))
        (local.set $r1 (f64x2.add (local.get $r1) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (i32.load offset=4 (local.get $ctx)) (local.get $o)) (v128.load32_zero (i32.add (i32.load (local.get $ctx)) (local.get $o)))))
          (local.get $av))))))
        (local.set $r2 (f64x2.add (local.get $r2) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (i32.load offset=12 (local.get $ctx)) (local.get $o)) (v128.load32_zero (i32.add (i32.load offset=8 (local.get $ctx)) (local.get $o)))))
          (i8x16.shuffle 0 1 2 3 4 5 6 7 24 25 26 27 28 29 30 31 (local.get $av) (local.get $ov)))))))
        (local.set $r3 (f64x2.add (local.get $r3) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load32_lane 1 (i32.add (i32.load offset=20 (local.get $ctx)) (local.get $o)) (v128.load32_zero (i32.add (i32.load offset=16 (local.get $ctx)) (local.get $o)))))
          (local.get $ov))))))
        (local.set $q (i32.add (local.get $q) (i32.const 1)))
        (br $cols)))
      ;; the row's means: * 1 / size where the box is full, / count at the ends, rounded to floats
      (if (local.get $full)
        (then
          (local.set $sa (f64.add (local.get $sa) (f64.promote_f32 (f32.demote_f64 (f64.mul (local.get $ra) (local.get $inv))))))
          (local.set $div (f64x2.splat (local.get $inv)))
          (local.set $s1 (f64x2.add (local.get $s1) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul (local.get $r1) (local.get $div))))))
          (local.set $s2 (f64x2.add (local.get $s2) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul (local.get $r2) (local.get $div))))))
          (local.set $s3 (f64x2.add (local.get $s3) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul (local.get $r3) (local.get $div)))))))
        (else
          (local.set $sa (f64.add (local.get $sa) (f64.promote_f32 (f32.demote_f64 (f64.div (local.get $ra) (local.get $count))))))
          (local.set $div (f64x2.splat (local.get $count)))
          (local.set $s1 (f64x2.add (local.get $s1) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.div (local.get $r1) (local.get $div))))))
          (local.set $s2 (f64x2.add (local.get $s2) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.div (local.get $r2) (local.get $div))))))
          (local.set $s3 (f64x2.add (local.get $s3) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.div (local.get $r3) (local.get $div))))))))
      (local.set $y (i32.add (local.get $y) (i32.const 1)))
      (br $rows)))
    (local.set $rowsInv (f64.div (f64.const 1) (f64.convert_i32_s (i32.add (i32.sub (local.get $y1) (local.get $y0)) (i32.const 1)))))
    (local.set $blurredA (f64.promote_f32 (f32.demote_f64 (f64.mul (local.get $sa) (local.get $rowsInv)))))
    (local.set $invA (f64.promote_f32 (f32.demote_f64 (f64.div (f64.const 1) (f64.add (local.get $blurredA) (f64.const 1e-5))))))
    (local.set $invB (f64.promote_f32 (f32.demote_f64 (f64.div (f64.const 1) (f64.add (f64.sub (f64.const 1) (local.get $blurredA)) (f64.const 1e-5))))))
    (local.set $div (f64x2.splat (local.get $rowsInv)))
    ;; fround(sum * rowsInv) * inverse, stored as a float
    (local.set $s1 (f32x4.demote_f64x2_zero (f64x2.mul
      (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul (local.get $s1) (local.get $div))))
      (f64x2.splat (local.get $invA)))))
    (local.set $s2 (f32x4.demote_f64x2_zero (f64x2.mul
      (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul (local.get $s2) (local.get $div))))
      (f64x2.replace_lane 1 (f64x2.splat (local.get $invA)) (local.get $invB)))))
    (local.set $s3 (f32x4.demote_f64x2_zero (f64x2.mul
      (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (f64x2.mul (local.get $s3) (local.get $div))))
      (f64x2.splat (local.get $invB)))))
    (local.set $o (i32.shl (local.get $p) (i32.const 2)))
    (v128.store32_lane 0 (i32.add (i32.load offset=28 (local.get $ctx)) (local.get $o)) (local.get $s1))
    (v128.store32_lane 1 (i32.add (i32.load offset=32 (local.get $ctx)) (local.get $o)) (local.get $s1))
    (v128.store32_lane 0 (i32.add (i32.load offset=36 (local.get $ctx)) (local.get $o)) (local.get $s2))
    (v128.store32_lane 1 (i32.add (i32.load offset=40 (local.get $ctx)) (local.get $o)) (local.get $s2))
    (v128.store32_lane 0 (i32.add (i32.load offset=44 (local.get $ctx)) (local.get $o)) (local.get $s3))
    (v128.store32_lane 1 (i32.add (i32.load offset=48 (local.get $ctx)) (local.get $o)) (local.get $s3))
    (i32.store8 (i32.add (i32.load offset=52 (local.get $ctx)) (local.get $p)) (i32.const 1)))

  ;; The lazy second pass for the k listed soft pixels (correctList's taps): each of the four
  ;; points a pixel reads is made (secondAt) the first time one is read. $ctx: secondAt's block.
  (func (export "secondAtList") (param $ctx i32) (param $list i32) (param $k i32) (param $width i32) (param $left i32) (param $rows i32) (param $cols i32)
    (local $j i32) (local $idx i32) (local $y i32) (local $q i32) (local $c i32) (local $done i32)
    (local $r0 i32) (local $r1 i32) (local $x0 i32) (local $x1 i32) (local $p i32)
    (local.set $done (i32.load offset=52 (local.get $ctx)))
    (block $end (loop $l
      (br_if $end (i32.ge_s (local.get $j) (local.get $k)))
      (local.set $idx (i32.load (i32.add (local.get $list) (i32.shl (local.get $j) (i32.const 2)))))
      (local.set $y (i32.div_u (local.get $idx) (local.get $width)))
      (local.set $q (i32.add (local.get $rows) (i32.shl (local.get $y) (i32.const 4))))
      (local.set $r0 (i32.load (local.get $q)))
      (local.set $r1 (i32.load offset=4 (local.get $q)))
      (local.set $c (i32.add (local.get $cols)
        (i32.shl (i32.sub (i32.sub (local.get $idx) (i32.mul (local.get $y) (local.get $width))) (local.get $left)) (i32.const 4))))
      (local.set $x0 (i32.load (local.get $c)))
      (local.set $x1 (i32.load offset=4 (local.get $c)))
      ;; in the JavaScript's order: p00, p01, p10, p11
      (local.set $p (i32.add (local.get $r0) (local.get $x0)))
      (if (i32.eqz (i32.load8_u (i32.add (local.get $done) (local.get $p)))) (then (call $secondAt (local.get $ctx) (local.get $p))))
      (local.set $p (i32.add (local.get $r0) (local.get $x1)))
      (if (i32.eqz (i32.load8_u (i32.add (local.get $done) (local.get $p)))) (then (call $secondAt (local.get $ctx) (local.get $p))))
      (local.set $p (i32.add (local.get $r1) (local.get $x0)))
      (if (i32.eqz (i32.load8_u (i32.add (local.get $done) (local.get $p)))) (then (call $secondAt (local.get $ctx) (local.get $p))))
      (local.set $p (i32.add (local.get $r1) (local.get $x1)))
      (if (i32.eqz (i32.load8_u (i32.add (local.get $done) (local.get $p)))) (then (call $secondAt (local.get $ctx) (local.get $p))))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $l))))
  ;; secondAt at each of the k plane points listed at $list not made yet (for the tests, which
  ;; compare it with the JavaScript's point by point).
  (func (export "secondAtPoints") (param $ctx i32) (param $list i32) (param $k i32)
    (local $j i32) (local $p i32)
    (block $end (loop $l
      (br_if $end (i32.ge_s (local.get $j) (local.get $k)))
      (local.set $p (i32.load (i32.add (local.get $list) (i32.shl (local.get $j) (i32.const 2)))))
      (if (i32.eqz (i32.load8_u (i32.add (i32.load offset=52 (local.get $ctx)) (local.get $p)))) (then (call $secondAt (local.get $ctx) (local.get $p))))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $l))))
)
