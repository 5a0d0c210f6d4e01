/* Lockstep: the same bits on every device.
 *
 * Umbrella header.  See docs/api.md for the API and docs/numerics.md for
 * the contract every device follows. */
#ifndef LOCKSTEP_H
#define LOCKSTEP_H

#include <lockstep/export.h>
#include <lockstep/version.h>
#include <lockstep/status.h>
#include <lockstep/types.h>
#include <lockstep/device.h>
#include <lockstep/ops.h>
#include <lockstep/info.h>
#include <lockstep/weights.h>
#include <lockstep/graph.h>
#include <lockstep/bitnet.h>
#include <lockstep/comm.h>

#endif
