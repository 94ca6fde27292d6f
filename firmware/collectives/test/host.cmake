# firmware/collectives: the ring schedule, framing and reduction of one rank,
# several ranks joined by in-order frame queues.
fw_host_test(collective collectives SOURCES collective.cpp LIBS vtrn_common)
