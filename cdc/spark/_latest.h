/* The Latest type (_latest.c), added to the _scan module by _scan.c's init. */
#ifndef CDC_LATEST_H
#define CDC_LATEST_H

#include <Python.h>

extern PyTypeObject LatestType;

#endif
