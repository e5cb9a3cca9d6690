# Lab 07's accounted step: gnuplot -c step_bar.gp DATA SVG MEASURED_ROOF_MS THEORETICAL_ROOF_MS STEP_MS TITLE NAMES
# DATA: one part a line, bottom to top: "name" from_ms to_ms; NAMES: the same names, quoted, in one string. A roof is the time the step's model FLOPs would
# take at that peak (model FLOPs over it): the bar can come down to it, never below.
set terminal svg size 760,620 dynamic background rgb 'white' font 'sans,12'
set termoption noenhanced
set output ARG2
measured = ARG3 + 0.0
theoretical = ARG4 + 0.0
step = ARG5 + 0.0
set title ARG6
set ylabel 'ms'
set xrange [0:3]
set yrange [0:*]
set xtics ('the step' 1)
set grid y
set key outside right top
set style fill solid 0.8 border rgb 'white'
set arrow 1 from 0.4, measured to 1.6, measured nohead front lw 2 lc rgb 'black'
set label 1 sprintf('measured peak: %.1f ms', measured) at 1.65, measured left
set arrow 2 from 0.4, theoretical to 1.6, theoretical nohead front lw 2 dt 2 lc rgb 'black'
set label 2 sprintf('theoretical peak: %.1f ms', theoretical) at 1.65, theoretical left
set arrow 3 from 0.4, step to 1.6, step nohead front lw 1 dt 3 lc rgb 'gray40'
set label 3 sprintf('timed step: %.1f ms', step) at 1.65, step left
plot for [i=0:words(ARG7) - 1] ARG1 every ::i::i using (1):(($2 + $3) / 2):(0.35):(($3 - $2) / 2) \
       with boxxyerror lc i + 1 title word(ARG7, i + 1)
