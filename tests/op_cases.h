/*
 * op_cases.h - the operator test cases shared by the backend tests: the small ONNX models in
 * tests/data/ops with the inputs and PyTorch outputs in tests/golden/ops (both written by
 * scripts/make_test_models.py).
 */
#ifndef VIDFEAT_OP_CASES_H
#define VIDFEAT_OP_CASES_H

#include <stddef.h>

#include "engine/backend.h"
#include "engine/graph.h"

typedef struct op_golden {
    float *x, *y;
    int x_rank, y_rank;
    long x_dims[6], y_dims[6];
    size_t x_count, y_count;
    int batch;
} op_golden;

/* The case names, NULL-terminated. */
extern const char *const op_case_names[];

/* Load tests/golden/ops/NAME.txt (exits on failure). */
void op_golden_load(const char *name, op_golden *g);
void op_golden_free(op_golden *g);

/* Load tests/data/ops/NAME.onnx, choose its output and (if optimize) run the passes. */
vf_graph *op_graph_load(const char *name, int optimize);

/* Does the backend run every node of g (its supports(), as prepare asks it)? When not, prints
 * "NAME: not on BACKEND: why" and returns 0. */
int op_backend_runs(const char *backend, const vf_graph *g, const char *name);

/* Compile g on a backend for max_batch and run n images; returns malloc'd output. */
float *op_run(const char *backend, vf_precision prec, vf_graph *g, int max_batch, const float *x,
              int n);
/* The same, also copying the backend's description of its plan into plan (plan_size bytes). */
float *op_run_described(const char *backend, vf_precision prec, vf_graph *g, int max_batch,
                        const float *x, int n, char *plan, size_t plan_size);

#endif /* VIDFEAT_OP_CASES_H */
