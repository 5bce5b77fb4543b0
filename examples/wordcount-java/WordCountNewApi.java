// Word count as a Java MapReduce job of Hadoop's new "mapreduce" API (the thesis's
// "MapReduce v2.0"): the same words and counts as WordCount.java, for an action with
// "mapreduceApi": "mapreduce" (examples/wordcount-java/wordcount-mapreduce-api.json).
package org.example;

import java.io.IOException;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Reducer;

public class WordCountNewApi {
    private static final Pattern WORD = Pattern.compile("[a-z]+(?:'[a-z]+)*");

    public static class Map extends Mapper<LongWritable, Text, Text, IntWritable> {
        private static final IntWritable ONE = new IntWritable(1);
        private final Text word = new Text();

        @Override
        protected void map(LongWritable offset, Text line, Context context) throws IOException, InterruptedException {
            Matcher m = WORD.matcher(line.toString().toLowerCase(Locale.ROOT));
            while (m.find()) {
                word.set(m.group());
                context.write(word, ONE);
            }
        }
    }

    public static class Sum extends Reducer<Text, IntWritable, Text, IntWritable> {
        @Override
        protected void reduce(Text word, Iterable<IntWritable> counts, Context context)
                throws IOException, InterruptedException {
            int total = 0;
            for (IntWritable count : counts) {
                total += count.get();
            }
            context.write(word, new IntWritable(total));
        }
    }
}
