from dfsearch.cli import main

if __name__ == "__main__":  # `python -m dfsearch`; importing this module (doctest collection) runs nothing
    main()
