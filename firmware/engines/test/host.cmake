# firmware/engines: the MPU table built from the HBM allocator (the engine
# glue itself needs the engine function and is tested end to end).
fw_host_test(mpu_table engines SOURCES mpu_table.cpp LIBS vtrn_common)
