#ifndef HALCYON_CCRYPTO_SHIM_H
#define HALCYON_CCRYPTO_SHIM_H
/* SHA-256 (content addresses and key hashing) and HMAC-SHA256 (webhook signatures). */
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif
