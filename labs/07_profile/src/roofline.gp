# Lab 07's roofline chart: gnuplot -c roofline.gp DATA SVG FP32_PEAK BANDWIDTH BF16_PEAK TITLE
# DATA: one op a line: "name" intensity(FLOP/byte) achieved(FLOP/s). Peaks in FLOP/s, bandwidth in bytes/s.
set terminal svg size 960,620 dynamic background rgb 'white' font 'sans,12'
set termoption noenhanced
set output ARG2
peak = ARG3 + 0.0
bw = ARG4 + 0.0
bf16 = ARG5 + 0.0
set title ARG6
set logscale xy
set xrange [0.05:2000]
set xlabel 'arithmetic intensity (FLOP per byte moved)'
set ylabel 'FLOP/s'
set format y '%.0s %cFLOP/s'
set grid
set key top left
set samples 400
roof(x) = x * bw < peak ? x * bw : peak
roof16(x) = x * bw < bf16 ? x * bw : bf16
plot roof(x) with lines lw 2 lc rgb 'black' \
       title sprintf('fp32 roof: %.3g GFLOP/s, memory %.3g GB/s (ridge %.2g FLOP/B)', peak / 1e9, bw / 1e9, peak / bw), \
     (bf16 > 0 ? roof16(x) : 1/0) with lines dt 2 lc rgb 'gray50' title (bf16 > 0 ? sprintf('bf16 roof: %.3g GFLOP/s', bf16 / 1e9) : ''), \
     ARG1 using 2:3 with points pt 7 ps 1.3 lc rgb '#1f77b4' title 'the step''s ops, measured', \
     ARG1 using 2:3:1 with labels offset 0.8,0.7 left notitle
