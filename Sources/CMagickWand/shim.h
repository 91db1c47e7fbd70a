#ifndef HALCYON_CMAGICKWAND_SHIM_H
#define HALCYON_CMAGICKWAND_SHIM_H
/* <features.h> first: magick-baseconfig.h defines _GNU_SOURCE, which otherwise makes
   fd_set clash between this module and libcurl/Foundation. */
#include <features.h>
/* SwiftPM drops the -D flags pkg-config gives; these must match the Q16 non-HDRI library. */
#ifndef MAGICKCORE_QUANTUM_DEPTH
#define MAGICKCORE_QUANTUM_DEPTH 16
#endif
#ifndef MAGICKCORE_HDRI_ENABLE
#define MAGICKCORE_HDRI_ENABLE 0
#endif
#include <wand/MagickWand.h>
#endif
