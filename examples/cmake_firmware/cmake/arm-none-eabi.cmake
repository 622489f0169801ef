# Toolchain file of the sample firmware: arm-none-eabi-gcc with picolibc,
# for the Cortex-M7 of an STM32H7 (the flags tessera's stm32h7 target uses:
# the network and this application must agree on the float ABI).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_AR arm-none-eabi-ar)
# a test program would need start-up code and a linker script to link
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CPU_FLAGS "-mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16")
set(CMAKE_C_FLAGS_INIT "${CPU_FLAGS} --specs=picolibc.specs -ffunction-sections -fdata-sections")
# picolibc's semihosting start-up: argv from the host, console and exit
# status (the C flags above come first on the link line too)
set(CMAKE_EXE_LINKER_FLAGS_INIT "--oslib=semihost --crt0=semihost -Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
