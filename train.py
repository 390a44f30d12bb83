"""Train and evaluate one configuration: ``python train.py loss=gaussian_corel dataset=digits`` (see README)."""

from clusterable.cli import main

if __name__ == "__main__":
    main()
