#ifndef HALCYON_CLIBPQ_SHIM_H
#define HALCYON_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
