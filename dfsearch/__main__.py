from dfsearch.cli import main

main()
