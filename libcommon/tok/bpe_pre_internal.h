/* bpe_pre_internal.h: the pre-token file's layout (man 5 lmpipe-pretok),
 * shared by its writer (bpe_pre_write.c) and reader (bpe_pre_read.c).
 *
 * All integers little-endian:
 *   header   "LMPRETOK" | u32 version (1) | u32 header length (16)
 *   sequence u32 per pre-token or special token of the text, in order: a
 *            pre-token's index, or BPE_PRE_SPECIAL | a special's index
 *   words    per distinct pre-token, in order of first appearance: u32
 *            length, bytes
 *   specials per special token the text was cut at: u32 length, bytes
 *   trailer  u64 sequence length | u64 words | u32 specials | u32 CRC-32C
 *            of every byte before it
 * The writer streams it all (a pipe will do); the reader reads the file
 * whole.  Internal to libcommon/tok. */
#ifndef LMPIPE_BPE_PRE_INTERNAL_H
#define LMPIPE_BPE_PRE_INTERNAL_H

#include "tok/bpe_pre.h"

static const char BPE_PRE_MAGIC[8] = { 'L', 'M', 'P', 'R', 'E', 'T', 'O', 'K' };
enum { BPE_PRE_VERSION = 1, BPE_PRE_HEADER_LEN = 16, BPE_PRE_TRAILER_LEN = 24 };

#endif
