# firmware/dma: region setup, HBM range and the queue scheduler, over real
# vtrn::dma::Queue objects from vtrn_common.
fw_host_test(dma_sched dma SOURCES dma_sched.cpp LIBS vtrn_common)
