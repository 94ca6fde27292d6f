# firmware/hbm: the HBM manager (owners, access check, ECC model, its routes
# through the dispatcher) over the allocator core from vtrn_common.
fw_host_test(hbm_manager hbm SOURCES hbm_manager.cpp LIBS fw_service_host)
