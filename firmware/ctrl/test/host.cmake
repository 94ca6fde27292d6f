# firmware/ctrl: dispatch, the validator, the core handlers and the arena.
fw_host_test(ctrl_dispatch ctrl LIBS fw_service_host)
