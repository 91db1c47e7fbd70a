import HalcyonCommands

await Halcyon.main()
