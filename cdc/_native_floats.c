/* FLOAT and DOUBLE as cdc.values and orjson write them (see _native_floats.h): the same PyOS_* conversions
 * as Python's float(), repr() and format(x, '.9g'), so the digits are Python's own.
 */
#include "_native_floats.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

int float32_of(double x, float *out) {
    float y = (float)x;
    if (isinf(y) && !isinf(x)) return -1;
    *out = y;
    return 0;
}

int shortest_float32(double x, double *out) {
    float packed, again;
    if (!isfinite(x) || float32_of(x, &packed) < 0) return -1;
    for (int digits = 6; digits <= 9; digits++) {
        char *candidate = PyOS_double_to_string(x, 'g', digits, 0, NULL);
        if (candidate == NULL) {
            PyErr_Clear();
            return -1;
        }
        double value = PyOS_string_to_double(candidate, NULL, NULL);
        PyMem_Free(candidate);
        if ((value == -1.0 && PyErr_Occurred()) || float32_of(value, &again) < 0) {
            PyErr_Clear();
            return -1;
        }
        if (memcmp(&again, &packed, sizeof packed) == 0) { /* the bytes, as struct.pack's are compared */
            *out = value;
            return 0;
        }
    }
    *out = x; /* none of 6..9 digits: Python keeps the number itself */
    return 0;
}

/* repr's shortest digits (PyOS_double_to_string, as repr). Where repr has no exponent orjson's text is
 * repr's. Where it has one, orjson 3.x keeps e+NN, writes 1e-05 <= |x| < 1e-04 out in full
 * (5.3e-05 -> 0.000053) and drops e-NN's zero padding (1.5e-7): checked against orjson over 1.5M values,
 * and by cdc.native_floats at import. */
Py_ssize_t json_double(double x, char *out, int exponents) {
    if (!isfinite(x)) return -1;
    char *repr = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) {
        PyErr_Clear();
        return -1;
    }
    const char *m = repr, *e = strchr(repr, 'e');
    size_t n = strlen(repr);
    Py_ssize_t len = -1;
    if (n >= 25 || strpbrk(repr, "ni") != NULL) { /* 25: room for the 0.0000 form; no inf or nan */
        len = -1;
    } else if (e == NULL || (exponents && e[1] == '+')) {
        memcpy(out, repr, n);
        len = (Py_ssize_t)n;
    } else if (exponents) {
        char *w = out;
        int exponent = atoi(e + 2);
        if (*m == '-') *w++ = *m++;
        if (exponent == 5) { /* repr's exponent starts below 1e-04: e-05 is the only one orjson writes out */
            memcpy(w, "0.0000", 6);
            w += 6;
            for (; m < e; m++)
                if (*m != '.') *w++ = *m;
        } else {
            memcpy(w, m, (size_t)(e - m));
            w += e - m;
            w += snprintf(w, 8, "e-%d", exponent);
        }
        len = w - out;
    }
    PyMem_Free(repr);
    return len;
}
