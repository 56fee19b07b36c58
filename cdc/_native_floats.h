/* FLOAT and DOUBLE as cdc.values and orjson write them, shared by both C row readers (the snapshot's
 * cdc/snapshot/_native.c and tail's cdc/rows/_native*.c): each extension compiles cdc/_native_floats.c in.
 */
#ifndef CDC_NATIVE_FLOATS_H
#define CDC_NATIVE_FLOATS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Room json_double needs at `out`. */
#define JSON_DOUBLE_SIZE 32

/* The 4-byte float nearest x, or -1 if it overflows (struct.pack('<f') raises then: Python decides). */
int float32_of(double x, float *out);

/* cdc.values.shortest_float32(x) for a finite x that fits a float: the fewest of 6..9 significant digits
 * that give back the same 4-byte float. 0, or -1 (no Python error left set: Python decides). */
int shortest_float32(double x, double *out);

/* orjson.dumps(x) of a finite double at `out` (JSON_DOUBLE_SIZE bytes): its length, or -1 (no Python error
 * left set) for what this cannot be sure of: nan, inf, or an exponent when `exponents` is 0 (orjson's own
 * way of writing them not checked: cdc.native_floats.orjson_writes_exponents_as_c). */
Py_ssize_t json_double(double x, char *out, int exponents);

#endif
