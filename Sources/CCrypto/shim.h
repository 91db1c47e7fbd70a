#ifndef HALCYON_CCRYPTO_SHIM_H
#define HALCYON_CCRYPTO_SHIM_H
/* Only SHA-256 is used (content addresses and key hashing). */
#include <openssl/sha.h>
#endif
