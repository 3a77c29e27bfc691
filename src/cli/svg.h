/*
 * svg.h - the charts of `remat report`, written as inline SVG into an HTML page: a plot
 * frame with ticked axes, the memory timeline of one schedule and a chart of curves.
 * They know nothing of planning: the report hands them plain arrays.
 *
 * Every chart carries data attributes with the exact numbers it draws (data-points,
 * data-peak, data-x, data-y), so that a test reading the rendered DOM can compare them
 * with `remat plan --json`. Sizes: a timeline writes about 14 bytes per step and a
 * rectangle per run of steps of one kind.
 */
#ifndef REMAT_CLI_SVG_H
#define REMAT_CLI_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A plot area: data ranges [x0, x1] x [y0, y1] drawn into the pixel box at (left, top). */
struct svg_plot {
    FILE *f;
    double x0, x1, y0, y1;
    double left, top, width, height;
};

/* Data to pixel coordinates. */
double svg_px(const struct svg_plot *p, double x);
double svg_py(const struct svg_plot *p, double y);

/* Axis units: how tick labels read. */
enum svg_unit { SVG_COUNT, SVG_BYTES, SVG_SECONDS };

/* The frame, grid lines, ticks and their labels, and the axis titles. */
void svg_axes(const struct svg_plot *p, enum svg_unit xu, enum svg_unit yu,
              const char *xtitle, const char *ytitle);
/* A horizontal line at data y across the plot, with a label at its right end (above the
 * line, or below it). */
void svg_hline(const struct svg_plot *p, double y, const char *cls, const char *label,
               bool below);

/* Text with HTML's special characters escaped (for element content and attributes). */
void html_text(FILE *f, const char *s);
/* The colour of series i (ten, then repeating). */
const char *svg_color(int i);

/* What a step of a timeline is, for its marks under the chart. */
enum svg_lane {
    SVG_FWD, SVG_RECOMPUTE, SVG_BWD, SVG_OFFLOAD, SVG_PREFETCH, SVG_WAIT, SVG_FREE,
    SVG_LANE_COUNT
};

/* One schedule's memory over its steps. */
struct svg_timeline {
    const char *strategy;
    size_t n;                       /* steps */
    const size_t *live;             /* n: live bytes after each step */
    const size_t *scratch;          /* n: the kernel's scratch during each step */
    const unsigned char *lane;      /* n: enum svg_lane of each step */
    size_t first_bwd;               /* the first backward step (n: none) */
    size_t peak, peak_step;         /* max(live + scratch) and where */
    size_t budget, lower;           /* horizontal lines (0: none drawn) */
    double y_max;                   /* the y axis' top */
};

/* Writes the timeline as one <svg class="timeline">: the live bytes as an area, the
 * scratch above them, one polyline of live + scratch with n points (data-points,
 * data-peak), forward and backward phases as bands, and under the plot a lane of marks
 * per step kind (data-kind, data-count: steps of that kind). */
void svg_timeline(FILE *f, const struct svg_timeline *t);

/* One curve of a chart of curves. */
struct svg_series {
    const char *name;
    int color;
    size_t n;
    const double *x, *y;            /* plotted */
    const size_t *data_x, *data_y;  /* written exactly as data-x and data-y (data_y
                                       may be NULL: none written) */
};

/* A chart of curves with a legend: <svg class="curves" data-kind=kind>, one
 * <polyline class="series" data-strategy data-points> per series with points; an
 * optional diagonal y = x (diagonal true). */
void svg_curves(FILE *f, const char *kind, const struct svg_series *s, int n_series,
                enum svg_unit xu, enum svg_unit yu, const char *xtitle, const char *ytitle,
                bool diagonal);

#endif
