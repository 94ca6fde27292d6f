# firmware/power: board -> config, activity replay, D0/D3hot, throttling, cap,
# the power routes through the dispatcher and the pace delay, on a simulated
# clock.
fw_host_test(power_service power SOURCES power_controller.cpp LIBS fw_service_host vtrn_fdt)
