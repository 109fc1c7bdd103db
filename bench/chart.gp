# bench/chart.gp: the targets of make bench as bars, holdcommit ÷ alternative
# in calls/s with synchronous_commit off and on, and each target's goal over
# its bar (a goal for one setting only has one point).
# Variables (gnuplot -e): data (from bench/report.awk: label, ratio off, ratio
# on, goal off, goal on; NaN for no goal), out (PNG), title.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1200,620 font ",10" noenhanced
} else {
    set terminal png size 1200,620 noenhanced
}
set output out
set title title
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "holdcommit ÷ alternative (calls/s)"
set yrange [0:*]
# room above the highest goal, whose point would sit on the border
set offsets 0, 0, 0.2, 0
set grid ytics
set xtics rotate by -30 left
set key top right
set bmargin 9
set rmargin 12
plot data using 2:xtic(1) title "synchronous_commit off" lc rgb "#4a7ebb", \
     '' using 3 title "synchronous_commit on" lc rgb "#e08a2c", \
     '' using ($0 - 1.0/6):4 with points pt 7 ps 1.4 lc rgb "#c0392b" title "goal", \
     '' using ($0 + 1.0/6):5 with points pt 7 ps 1.4 lc rgb "#c0392b" notitle, \
     1 with lines dt 2 lc rgb "#555555" notitle
