# Lab 11's chart: bytes per worker by ZeRO stage, stacked, predicted beside measured.
# gnuplot -c bytes_per_worker.gp DATA SVG   (DATA: "label" weights gradients optimizer activations, in MiB)
set terminal svg size 900,520 dynamic background rgb 'white'
set output ARG2
set title 'Bytes per worker by ZeRO stage: formula (predicted) beside the counting allocator (measured)'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set ylabel 'MiB per worker'
set xlabel 'stage'
set key outside bottom center horizontal
set grid ytics
set xtics nomirror scale 0
plot ARG1 using 2:xtic(1) title 'weights at rest', \
     '' using 3 title 'gradients', \
     '' using 4 title 'optimizer state (AdamW)', \
     '' using 5 title 'activations and transients'
