from boxed_openenv.server import main

main()
