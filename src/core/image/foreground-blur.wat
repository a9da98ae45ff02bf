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
)
