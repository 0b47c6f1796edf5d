"""Sentences for probing word senses: an ambiguous word in ten sentences for each of two of its senses.

Written for the course (Chapter 1) in the style of the Gutenberg novels, tokens split by spaces, the word itself
appearing once per sentence. ``WORD_SENSES[word][sense]`` is the list of sentences.
"""

WORD_SENSES = {
    "bank": {
        "river": [
            "He sat on the bank of the river and watched the water .",
            "The boat drifted slowly towards the muddy bank .",
            "We walked along the bank of the stream until dark .",
            "Wild flowers grew thick upon the green bank .",
            "The fisherman climbed up the steep bank with his net .",
            "She lay on the grassy bank and fell asleep in the sun .",
            "The water rose and flooded the bank of the river .",
            "On the far bank the trees bent over the water .",
            "The children ran down the bank and into the shallow river .",
            "A heron stood still on the bank among the reeds .",
        ],
        "money": [
            "She took the money to the bank and opened an account .",
            "The bank lent him a thousand pounds .",
            "He had a clerk 's place in a bank in the city .",
            "My father kept all his savings in the bank .",
            "The bank refused to pay the cheque .",
            "He drew fifty pounds from the bank this morning .",
            "The old bank had failed and every depositor was ruined .",
            "The manager of the bank counted the notes twice .",
            "They robbed the bank and escaped with the gold .",
            "I must go to the bank before it closes .",
        ],
    },
    "play": {
        "theatre": [
            "We went to see a new play at the theatre .",
            "The play was performed for the first time in London .",
            "She wrote a play in three acts .",
            "The actors rehearsed the play all week .",
            "The first act of the play was dull .",
            "He bought two tickets for the play on Saturday .",
            "The audience applauded loudly at the end of the play .",
            "In the play the king dies in the last scene .",
            "The critics praised the play and its author .",
            "They read the whole play aloud in the evening .",
        ],
        "game": [
            "The children went out to play in the garden .",
            "Let us play cards after dinner .",
            "The boys play football every afternoon .",
            "She liked to play with the little dog .",
            "Will you play a game of chess with me ?",
            "The kittens play on the floor all day .",
            "He taught his son to play cricket .",
            "They used to play together when they were young .",
            "Go and play with your brother .",
            "We could play at hide and seek .",
        ],
    },
}
