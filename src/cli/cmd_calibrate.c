/*
 * cmd_calibrate.c - vidfeat calibrate: the int8 scales of a network from sample frames.
 */
#include <stdio.h>

#include "cli/cli.h"

#define DEFAULT_CALIBRATE_FRAMES 256
#define DEFAULT_CALIBRATE_FPS    2.0

/* vidfeat calibrate: int8 scales from sample frames of the inputs (--frames in all, spread
 * over the files, --fps 2 unless sampling is given), written to the calibration file. */
int cmd_calibrate(cli *c, int argc, char **argv)
{
    if (cli_single_values(c))
        return EXIT_USAGE;
    if (c->n_precisions && c->cfg.precision != VF_PRECISION_INT8) {
        fprintf(stderr, "vidfeat: calibrate: the scales are for --precision int8\n");
        return EXIT_USAGE;
    }
    if (c->db_set) {
        fprintf(stderr, "vidfeat: calibrate writes no database (-o); the scales go to "
                        "--int8-scales FILE or beside the model\n");
        return EXIT_USAGE;
    }
    if (argc < 1) {
        fprintf(stderr, "vidfeat: calibrate: no input files (sample videos or images)\n");
        return EXIT_USAGE;
    }
    c->calibrate = 1;
    c->cfg.precision = VF_PRECISION_INT8;
    c->cfg.recalibrate = 1;
    c->cfg.db_path = NULL;
    if (!c->cfg.calibration_frames)
        c->cfg.calibration_frames = DEFAULT_CALIBRATE_FRAMES;
    if (c->cfg.sample_fps == 0 && c->cfg.every <= 1 && !c->cfg.keyframes)
        c->cfg.sample_fps = DEFAULT_CALIBRATE_FPS;
    path_list inputs = {0};
    int status = cli_collect_inputs(c, argc, argv, &inputs);
    if (!c->cfg.max_frames && inputs.n > 0) /* an even share of the frames from every file */
        c->cfg.max_frames = (c->cfg.calibration_frames + inputs.n - 1) / inputs.n;
    status = cli_run_pipeline(c, &inputs, status);
    cli_free_paths(&inputs);
    return status;
}
