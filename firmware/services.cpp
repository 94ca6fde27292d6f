// The chip's service table: one row per service, in boot order. fw_main
// initialises them in this order, polls them in this order every turn of
// the event loop and asks each for work, wake-up times and telemetry; the
// control dispatcher routes each request to the row that has a route for
// its kind. Adding a service is a folder (firmware/<name>/ with its
// sources, include/ and test/) and one row here (firmware/README.md).
//
// The order is the boot order users see in the log, and it carries the
// dependencies: the engines are found and reset before anything could use
// them (the HBM service programs their MPU); DMA derives the HBM range the HBM service manages and
// polices; power reads DMA's totals and takes the links' reports;
// collectives register with the links; jobs come up after every mapping
// their executors use. The control service is first so a turn serves the
// host's requests before any other work; reliability is last so an injected
// fault is committed only after its response went out in the same turn.
#include "fw/collectives_service.h"
#include "fw/ctrl_service.h"
#include "fw/dma_service.h"
#include "fw/engines_service.h"
#include "fw/hbm_service.h"
#include "fw/jobs_service.h"
#include "fw/links_service.h"
#include "fw/power_service.h"
#include "fw/reliability.h"
#include "fw/services.h"

namespace fw {
namespace {

Service* const kServices[] = {
    &ctrl::service(),
    &engines::service(),
    &dma::service(),
    &hbm::service(),
    &power::service(),
    &links::service(),
    &collectives::service(),
    &jobs::service(),
    &reliability::service(),
};

}  // namespace

std::span<Service* const> services() { return kServices; }

}  // namespace fw
