/*
 * plot.h - a grouped bar chart as a standalone SVG file (vidfeat bench --plot): no plotting
 * library, so the chart is the same on every machine and small enough to commit.
 */
#ifndef VIDFEAT_PLOT_H
#define VIDFEAT_PLOT_H

#include <stddef.h>

/* One bar: its series (colour and legend entry), its group (position on the x axis), its value.
 * Series and groups are drawn in the order they first appear. */
typedef struct plot_bar {
    const char *series;
    const char *group;
    double value;
} plot_bar;

/* Write the chart to path (replacing it). 0, or -1 with the reason in err. */
int plot_svg(const char *path, const char *title, const char *subtitle, const char *y_label,
             const plot_bar *bars, int n_bars, char *err, size_t err_size);

#endif /* VIDFEAT_PLOT_H */
