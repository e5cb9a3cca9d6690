# Lab 07's top ops chart: gnuplot -c top_ops.gp DATA SVG TITLE
# DATA: one op a line, largest first: "name" share(% of the step) self_ms calls.
set terminal svg size 960,560 dynamic background rgb 'white' font 'sans,12'
set termoption noenhanced
set output ARG2
set title ARG3
set xlabel 'self time, % of the profiled training step'
set yrange [*:*] reverse
set offsets 0, graph 0.5, 0.6, 0.6
set xrange [0:*]
set grid x
set style fill solid 0.75 noborder
set key off
plot ARG1 using (0.5 * $2):0:(0.5 * $2):(0.38):ytic(1) with boxxyerror lc rgb '#1f77b4', \
     ARG1 using 2:0:(sprintf(' %.1f%%  %.2f ms  x%d', $2, $3, $4)) with labels left
